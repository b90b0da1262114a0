"""A model served disaggregated: the registry's ``pools:`` (a prefill and a decode
Deployment) give one ScaledObject per pool on that pool's own signal; the pools' pods
carry their role and Prometheus copies it to ``role``; each pool's sidecar judges the
SLOs of its role. Inputs: the examples (``mistral-7b``) and variations of them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.labels.registry import ModelEntry
from fleetwatch.manifests import ManifestError, build, load_inputs
from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.slo.spec import SLOFile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from regen_manifests_golden import CONFIGS, SETTINGS  # noqa: E402

EX = ROOT / "examples"


def _files(models: Path | None = None, configs: list[str] | None = None) -> dict[str, str]:
    inputs = load_inputs(configs or CONFIGS, str(models or EX / "models.yaml"),
                         str(EX / "slos.yaml"), str(EX / "receivers.yaml"))
    files, _warnings = build(inputs, SETTINGS)
    return files


def _scaled_objects(files: dict[str, str]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(files["scaledobjects.yaml"])
            if d}


def test_one_scaled_object_per_pool_on_its_own_signal():
    objs = _scaled_objects(_files())
    for role in ("prefill", "decode"):
        obj = objs[f"mistral-7b-{role}"]
        assert obj["spec"]["scaleTargetRef"]["name"] == f"mistral-7b-{role}"
        query = obj["spec"]["triggers"][0]["metadata"]["query"]
        assert query == ('sum(model:fleetwatch_autoscaling_signal:sum{model="mistral-7b", '
                         f'role="{role}"}})')
        assert obj["metadata"]["annotations"]["fleetwatch.io/role"] == role
    # a whole-request deployment's query names no role
    assert "role=" not in objs["llama-3-8b"]["spec"]["triggers"][0]["metadata"]["query"]


def test_pool_pods_carry_their_role_and_prometheus_copies_it():
    files = _files()
    patch = yaml.safe_load(files["patches/genai/mistral-7b-decode.yaml"].split("---", 1)[1])
    labels = patch["spec"]["template"]["metadata"]["labels"]
    assert labels["fleetwatch.io/role"] == "decode"
    whole = yaml.safe_load(files["patches/genai/llama-3-8b.yaml"].split("---", 1)[1])
    assert "fleetwatch.io/role" not in whole["spec"]["template"]["metadata"]["labels"]
    monitor = yaml.safe_load(files["podmonitor.yaml"].split("---", 1)[1])
    relabel = monitor["spec"]["podMetricsEndpoints"][0]["relabelings"]
    assert {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_label_fleetwatch_io_role"],
            "targetLabel": "role"} in relabel
    rules = files["prometheusrule.yaml"]
    assert ("sum by (model, model_version, backend, role) (fleetwatch_autoscaling_signal_ratio"
            in rules)


def _registry_with(tmp_path: Path, entry: dict) -> Path:
    doc = yaml.safe_load((EX / "models.yaml").read_text())
    doc["models"].append(entry)
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


_OWNER = {"team": "genai", "owner": "bob@example.com", "oncall": "genai-oncall",
          "latency_tier": "disaggregated"}


def test_a_pool_role_its_sidecar_does_not_have_is_refused(tmp_path):
    models = _registry_with(tmp_path, {"name": "phi-3", **_OWNER, "pools": [
        {"name": "phi-3-prefill", "sidecar": "sidecar-vllm", "role": "prefill"},
        {"name": "phi-3-decode", "sidecar": "sidecar-vllm-decode", "role": "decode"}]})
    with pytest.raises(ManifestError, match=r"models\[4\] \(name 'phi-3'\): field "
                       r"'deployment.role': 'prefill', but the targets of .*sidecar-vllm.yaml "
                       r"give role 'both'"):
        _files(models)


def test_a_model_deployed_whole_and_as_pools_is_refused(tmp_path):
    whole = {**_OWNER, "latency_tier": "streaming"}  # llm-ttft covers it
    models = _registry_with(tmp_path, {"name": "mistral-7b", "version": "2", **whole,
                                       "deployment": {"name": "mistral-7b-whole",
                                                      "sidecar": "sidecar-vllm"}})
    with pytest.raises(ManifestError, match="model 'mistral-7b' is also deployed as a "
                       "prefill/decode pool"):
        _files(models)


@pytest.mark.parametrize("pools,message", [
    ([{"name": "a", "role": "prefill"}, {"name": "b", "role": "prefill"}],
     r"pools: roles \['prefill', 'prefill'\] given"),
    ([{"name": "a", "role": "both"}], r"pools: roles \['both'\] given"),
])
def test_pools_are_one_prefill_and_one_decode(pools, message):
    with pytest.raises(ValueError, match=message):
        ModelEntry(name="m", **_OWNER, pools=pools)


def test_deployment_and_pools_are_exclusive():
    with pytest.raises(ValueError, match=r"either deployment .* or pools"):
        ModelEntry(name="m", **_OWNER, deployment={"name": "m"},
                   pools=[{"name": "a", "role": "prefill"}, {"name": "b", "role": "decode"}])


def _config(*roles: str) -> SidecarConfig:
    return SidecarConfig.model_validate({"targets": [
        {"name": f"t{i}", "kind": "vllm", "url": f"http://127.0.0.1:{8000 + i}/metrics",
         "role": r, "labels": {"engine": str(i)}} for i, r in enumerate(roles)]})


def test_a_sidecar_has_its_targets_role():
    assert _config("prefill").role == "prefill"
    assert _config("both", "decode").role == "decode"
    assert _config("both").role == "both"
    with pytest.raises(ValueError, match="targets of roles decode and prefill in one sidecar"):
        _config("prefill", "decode")


def test_a_pool_judges_the_slos_of_its_role():
    slos = SLOFile.model_validate(yaml.safe_load((EX / "slos.yaml").read_text()))
    prefill = {s.name for s in slos.for_role("prefill").slos}
    decode = {s.name for s in slos.for_role("decode").slos}
    assert "llm-prefill-ttft" in prefill and "llm-decode-itl" not in prefill
    assert "llm-decode-itl" in decode and "llm-prefill-ttft" not in decode
    assert "llm-ttft" in prefill and "llm-ttft" in decode  # no roles: every pool
    assert slos.for_role("both").slos == [s for s in slos.slos
                                          if not s.selector.roles or "both" in s.selector.roles]


def test_serve_refuses_a_pool_with_no_slo_of_its_role(tmp_path):
    slos = yaml.safe_load((EX / "slos.yaml").read_text())
    slos["slos"] = [s for s in slos["slos"] if s["name"] == "llm-decode-itl"]
    (tmp_path / "slos.yaml").write_text(yaml.safe_dump(slos))
    cfg = yaml.safe_load((EX / "sidecar-vllm-prefill.yaml").read_text())
    cfg["registry"] = str(EX / "models.yaml")
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(main, ["serve", "--config", str(tmp_path / "sidecar.yaml"),
                                    "--slos", str(tmp_path / "slos.yaml")])
    assert res.exit_code == 2, res.output
    assert "field 'selector.roles': no SLO's selector.roles covers role 'prefill'" in res.output
