"""``fleetwatch manifests``: golden output on the examples, every object valid against the
real schemas (and broken ones rejected by the same check), the Deployment patch, KEDA
triggers, probes by tier, strict input errors, and the Dockerfile's essentials."""

from __future__ import annotations

import copy
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwatch import promql
from fleetwatch.cli import main
from fleetwatch.manifests import Settings, build, load_inputs
from fleetwatch.manifests import keda as keda_mod
from fleetwatch.manifests import sidecar as sidecar_mod
from fleetwatch.manifests.common import Deployment, SidecarSpec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from regen_manifests_golden import CONFIGS, GOLDEN, SETTINGS, golden_files  # noqa: E402

from tests.support import unit_mode  # noqa: E402
from tests.support.k8s_schemas import errors  # noqa: E402

EX = ROOT / "examples"
NOT_K8S = {"kustomization.yaml", "prometheus-scrape.yaml"}


def _docs(files: dict[str, str]) -> list[tuple[str, dict]]:
    return [(name, d) for name, text in files.items() if name not in NOT_K8S
            and not name.startswith("patches/") for d in yaml.safe_load_all(text) if d]


@functools.cache
def _built(settings: Settings) -> dict[str, str]:
    inputs = load_inputs(CONFIGS, str(EX / "models.yaml"), str(EX / "slos.yaml"),
                         str(EX / "receivers.yaml"))
    return build(inputs, settings)[0]


def _build(settings: Settings = SETTINGS) -> dict[str, str]:
    """The examples' manifests (built once per settings; callers get a copy)."""
    return dict(_built(settings))


# -- golden ----------------------------------------------------------------------------------
def test_output_equals_golden_files():
    files = golden_files()
    on_disk = {p.relative_to(GOLDEN).as_posix(): p.read_text(encoding="utf-8")
               for p in GOLDEN.rglob("*") if p.is_file()}
    assert sorted(files) == sorted(on_disk), "run tools/regen_manifests_golden.py"
    for name, text in files.items():
        assert text == on_disk[name], f"{name} differs: run tools/regen_manifests_golden.py"
    assert files == golden_files()  # deterministic


def test_cli_writes_the_golden_files(tmp_path):
    args = ["manifests", "--registry", str(EX / "models.yaml"), "--slos",
            str(EX / "slos.yaml"), "--receivers", str(EX / "receivers.yaml"),
            "--release", "kube-prometheus-stack", "--out", str(tmp_path)]
    for c in CONFIGS:
        args += ["--config", c]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "wrote 15 files" in res.output
    for p in GOLDEN.rglob("*.yaml"):
        assert (tmp_path / p.relative_to(GOLDEN)).read_text() == p.read_text()


# -- schemas ---------------------------------------------------------------------------------
def test_every_object_passes_its_schema():
    kinds = {}
    for variant in (SETTINGS, Settings(trigger="metrics-api", monitor="servicemonitor")):
        for name, doc in _docs(_build(variant)):
            assert errors(doc) == [], (name, doc["kind"], doc["metadata"]["name"])
            kinds[doc["kind"]] = kinds.get(doc["kind"], 0) + 1
    assert set(kinds) == {"ConfigMap", "Secret", "Service", "PodMonitor", "ServiceMonitor",
                          "ScaledObject", "PrometheusRule"}


def _first(files, kind):
    return next(copy.deepcopy(d) for _, d in _docs(files) if d["kind"] == kind)


@pytest.mark.parametrize(("kind", "breakage"), [
    ("ScaledObject", lambda d: d["spec"].update(minReplicas=2)),          # misspelt field
    ("ScaledObject", lambda d: d["spec"].update(minReplicaCount="2")),    # text, not int
    ("ScaledObject", lambda d: d["spec"]["scaleTargetRef"].pop("name")),  # required
    ("PodMonitor", lambda d: d["spec"]["podMetricsEndpoints"][0].update(port=9810)),
    ("ServiceMonitor", lambda d: d["spec"].update(endpoint=[])),
    ("PrometheusRule", lambda d: d["spec"]["groups"][0]["rules"][0].update(expr=None)),
    ("Service", lambda d: d["spec"]["ports"][0].update(port="fleetwatch")),
    ("ConfigMap", lambda d: d.update(date={})),
    ("Secret", lambda d: d["metadata"].update(name=7)),
])
def test_a_broken_object_is_rejected_by_the_same_check(kind, breakage):
    doc = _first(_build(Settings(monitor="servicemonitor")), kind)
    assert errors(doc) == []
    breakage(doc)
    assert errors(doc), f"a broken {kind} passed validation"


def _strategic_merge(deployment: dict, patch: dict) -> dict:
    """What ``kubectl patch --type strategic`` does for the fields the patch sets:
    containers and volumes merge by name, labels and annotations key by key."""
    out = copy.deepcopy(deployment)
    pt, ot = patch["spec"]["template"], out["spec"]["template"]
    for key in ("labels", "annotations"):
        ot.setdefault("metadata", {}).setdefault(key, {}).update(pt["metadata"].get(key, {}))
    for key in ("containers", "volumes"):
        items = {c["name"]: c for c in ot["spec"].get(key, [])}
        items.update({c["name"]: c for c in pt["spec"][key]})
        ot["spec"][key] = list(items.values())
    return out


ENGINE = {"apiVersion": "apps/v1", "kind": "Deployment",
          "metadata": {"name": "ranker", "namespace": "search"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "ranker"}},
                   "template": {"metadata": {"labels": {"app": "ranker"}},
                                "spec": {"containers": [{
                                    "name": "triton", "image": "tritonserver:24.05",
                                    "ports": [{"containerPort": 8002}]}]}}}}


def test_the_patch_adds_the_sidecar_to_an_existing_deployment(tmp_path):
    files = _build()
    patch = yaml.safe_load(files["patches/search/ranker.yaml"])
    merged = _strategic_merge(ENGINE, patch)
    assert errors(merged) == []
    spec = merged["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["triton", "fleetwatch"]
    assert merged["spec"]["selector"] == ENGINE["spec"]["selector"]  # immutable: untouched
    side = spec["containers"][1]
    assert side["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert side["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert side["securityContext"]["runAsNonRoot"] is True
    assert side["securityContext"]["readOnlyRootFilesystem"] is True
    # the Service and both monitors select the patched pods
    labels = merged["spec"]["template"]["metadata"]["labels"]
    svc = next(d for _, d in _docs(files) if d["kind"] == "Service"
               and d["metadata"]["name"] == "ranker-fleetwatch")
    assert svc["spec"]["selector"].items() <= labels.items()
    pm = yaml.safe_load(files["podmonitor.yaml"].split("---", 1)[1])
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # a broken patch gives an invalid Deployment
    bad = copy.deepcopy(patch)
    bad["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "x"
    assert errors(_strategic_merge(ENGINE, bad))
    kubectl = shutil.which("kubectl")
    if kubectl:  # the real strategic merge agrees with the one above
        (tmp_path / "d.yaml").write_text(yaml.safe_dump(ENGINE))
        (tmp_path / "p.yaml").write_text(files["patches/search/ranker.yaml"])
        out = subprocess.run([kubectl, "patch", "--local", "-f", str(tmp_path / "d.yaml"),
                              "--type", "strategic", "--patch-file", str(tmp_path / "p.yaml"),
                              "-o", "yaml"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        real = yaml.safe_load(out.stdout)
        assert errors(real) == []
        rt, mt = real["spec"]["template"], merged["spec"]["template"]
        assert rt["metadata"] == mt["metadata"]
        for key in ("containers", "volumes"):  # kubectl puts the patch's items first
            assert sorted(rt["spec"][key], key=lambda c: c["name"]) == \
                sorted(mt["spec"][key], key=lambda c: c["name"])


@pytest.mark.skipif(not shutil.which("kubectl") and not os.environ.get("CI"),
                    reason="kubectl (kustomize) not installed; under CI=true this fails instead")
def test_kustomize_builds_the_output(tmp_path):
    from fleetwatch.files import write_tree as write_files

    write_files(_build(Settings(monitor="servicemonitor")), tmp_path)
    out = subprocess.run(["kubectl", "kustomize", str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert sorted({d["kind"] for d in docs}) == ["ConfigMap", "PrometheusRule", "ScaledObject",
                                                  "Secret", "Service", "ServiceMonitor"]
    assert all(errors(d) == [] for d in docs)


# -- behaviour -------------------------------------------------------------------------------
def _scaled(files):
    return {d["metadata"]["name"]: d for _, d in _docs(files) if d["kind"] == "ScaledObject"}


def test_prometheus_trigger_sums_the_fleet_signal_with_average_value():
    so = _scaled(_build())
    trig = {n: s["spec"]["triggers"][0] for n, s in so.items()}
    assert {t["type"] for t in trig.values()} == {"prometheus"}
    assert {t["metricType"] for t in trig.values()} == {"AverageValue"}
    q = {n: t["metadata"]["query"] for n, t in trig.items()}
    assert q["llama-3-8b"] == 'sum(model:fleetwatch_autoscaling_signal:sum{model="llama-3-8b"})'
    # the canary scales on version 2 only, the main deployment on every other version
    assert q["ranker-canary"].endswith('{model="ranker", model_version="2"})')
    assert q["ranker"].endswith('{model="ranker", model_version!~"2"})')
    assert trig["ranker"]["metadata"]["ignoreNullValues"] == "false"
    assert so["llama-3-8b"]["spec"]["minReplicaCount"] == 2
    assert so["llama-3-8b"]["spec"]["maxReplicaCount"] == 16
    behavior = so["llama-3-8b"]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]
    assert behavior["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600


def test_prometheus_scaled_objects_hold_the_replicas_when_the_metric_is_missing():
    """KEDA's fallback: after 3 failed polls (no series: ignoreNullValues false) the
    current replicas are kept (currentReplicasIfHigher with the minimum), never fewer; the
    fallback passes the real KEDA CRD schema, and a wrong behaviour does not."""
    for name, so in _scaled(_build()).items():
        fb = so["spec"]["fallback"]
        assert fb == {"failureThreshold": 3, "replicas": so["spec"]["minReplicaCount"],
                      "behavior": "currentReplicasIfHigher"}, name
        assert errors(so) == []
        broken = copy.deepcopy(so)
        broken["spec"]["fallback"]["behavior"] = "keepCurrent"
        assert errors(broken), name
        broken["spec"]["fallback"] = {"replicas": 1}  # failureThreshold is required
        assert errors(broken), name


def test_metrics_api_scaled_objects_have_no_fallback():
    """KEDA refuses fallback with metricType Value (its admission webhook)."""
    so = _scaled(_build(Settings(trigger="metrics-api")))
    assert all("fallback" not in s["spec"] for s in so.values())


def test_metrics_api_trigger_reads_one_sidecar_with_metric_type_value():
    so = _scaled(_build(Settings(trigger="metrics-api")))
    t = so["llama-3-8b"]["spec"]["triggers"][0]
    assert t["type"] == "metrics-api" and t["metricType"] == "Value"
    assert t["metadata"] == {
        "url": "http://llama-3-8b-fleetwatch.genai.svc:9810/autoscaling/llama-3-8b",
        "format": "json", "valueLocation": "signal", "targetValue": "1"}


def _registry(tmp_path, deployment: dict, **entry) -> Path:
    e = {"name": "ranker", "team": "search", "owner": "a@x", "oncall": "s",
         "latency_tier": "interactive", "deployment": deployment, **entry}
    p = tmp_path / "models.yaml"
    p.write_text(yaml.safe_dump({"models": [e]}))
    return p


def test_startup_probe_allowance_by_tier_or_field(tmp_path):
    def threshold(**kw):
        reg = _registry(tmp_path, {"name": "d", **kw.pop("dep", {})}, **kw)
        files = build(load_inputs([CONFIGS[0]], str(reg), str(EX / "slos.yaml"), None),
                      Settings())[0]
        c = yaml.safe_load(files["patches/default/d.yaml"])["spec"]["template"]["spec"]
        return c["containers"][0]["startupProbe"]["failureThreshold"]

    assert threshold() == 12                                  # interactive: 120 s
    assert threshold(name="llama-1", latency_tier="streaming") == 60   # LLM tier: 600 s
    assert threshold(dep={"startup_seconds": 905}) == 91      # the field wins, rounded up


def test_configmap_files_start_a_sidecar(tmp_path):
    files = _build()
    cm = next(d for _, d in _docs(files) if d["kind"] == "ConfigMap"
              and d["metadata"]["name"] == "fleetwatch-sidecar-vllm")
    for name, text in cm["data"].items():
        (tmp_path / name).write_text(text)
    assert yaml.safe_load(cm["data"]["sidecar.yaml"])["registry"] == "models.yaml"
    # the quota file the configuration names travels with it, verbatim
    assert yaml.safe_load(cm["data"]["sidecar.yaml"])["quotas"] == "quotas.yaml"
    assert cm["data"]["quotas.yaml"] == (EX / "quotas.yaml").read_text()
    r = CliRunner().invoke(main, ["validate", "--config", str(tmp_path / "sidecar.yaml")])
    assert r.exit_code == 0, r.output
    assert "1 target, 4 registry entries" in r.output
    r = CliRunner().invoke(main, ["slo", "validate", str(tmp_path / "slos.yaml")])
    assert r.exit_code == 0, r.output


def _otlp_objects(tmp_path, traces: dict) -> tuple[dict, dict]:
    """The patched engine Deployment and the Service of a sidecar with ``traces``."""
    reg = _registry(tmp_path, {"name": "ranker", "namespace": "search"})
    cfg = yaml.safe_load((EX / "sidecar.yaml").read_text())
    cfg.update(registry=str(reg), traces=traces)
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
    files = build(load_inputs([str(tmp_path / "sidecar.yaml")], str(reg),
                              str(EX / "slos.yaml"), None), Settings())[0]
    merged = _strategic_merge(ENGINE, yaml.safe_load(files["patches/search/ranker.yaml"]))
    svc = next(d for _, d in _docs(files) if d["kind"] == "Service")
    cm = next(d for _, d in _docs(files) if d["kind"] == "ConfigMap"
              and d["metadata"]["name"] == "fleetwatch-sidecar")
    assert errors(merged) == [] and errors(svc) == [] and errors(cm) == []
    merged["sidecar_yaml"] = yaml.safe_load(cm["data"]["sidecar.yaml"])
    return merged, svc


def test_the_otlp_receiver_stays_on_loopback_without_auth(tmp_path):
    """The default: the engines of the pod send to 127.0.0.1; no port on the pod or the
    Service, no Secret."""
    from fleetwatch.sidecar.config import parse_config

    merged, svc = _otlp_objects(tmp_path, {"listen": {"port": 4318}})
    traces = parse_config(merged["sidecar_yaml"]).traces
    assert traces is not None and traces.listen.address == "127.0.0.1"
    side = merged["spec"]["template"]["spec"]["containers"][1]
    assert [p["name"] for p in side["ports"]] == ["fleetwatch"]
    assert [p["name"] for p in svc["spec"]["ports"]] == ["fleetwatch"]
    assert all("secret" not in v for v in merged["spec"]["template"]["spec"]["volumes"])


def test_an_authenticated_otlp_receiver_is_exposed_with_its_secret_mounted(tmp_path):
    merged, svc = _otlp_objects(tmp_path, {
        "listen": {"address": "0.0.0.0", "port": 4318},
        "auth": {"bearer_token_file": "/etc/fleetwatch-otlp/token"}})
    assert merged["sidecar_yaml"]["traces"]["listen"]["address"] == "0.0.0.0"
    pod = merged["spec"]["template"]["spec"]
    side = pod["containers"][1]
    assert {"name": "otlp-http", "containerPort": 4318, "protocol": "TCP"} in side["ports"]
    assert "otlp-http" in [p["name"] for p in svc["spec"]["ports"]]
    assert {"name": "fleetwatch-otlp-auth", "mountPath": "/etc/fleetwatch-otlp",
            "readOnly": True} in side["volumeMounts"]
    assert {"name": "fleetwatch-otlp-auth",
            "secret": {"secretName": "fleetwatch-otlp"}} in pod["volumes"]


@pytest.mark.parametrize(("deployment", "entry", "config", "message"), [
    ({"name": "d", "min_replicas": 3, "max_replicas": 2}, {}, None,
     "models.yaml: models[0] (name 'ranker'): field 'deployment': max_replicas (2) is below "
     "min_replicas (3)"),
    ({"name": "d", "min_replicas": 0}, {}, None,
     "field 'deployment.min_replicas': Input should be greater than or equal to 1"),
    ({"name": "Ranker_1"}, {}, None, "field 'deployment.name': 'Ranker_1' is not a DNS-1035"),
    ({"name": "d"}, {"name": "llama-*"}, None, "deployment.model is required"),
    ({"name": "d", "sidecar": "nope"}, {}, None,
     "field 'deployment.sidecar': 'nope' is no --config file's name (known: sidecar)"),
    ({"name": "d", "replicas": 2}, {}, None, "field 'deployment.replicas': unknown field"),
    ({"name": "d", "model": "unselected"}, {}, None,
     "field 'deployment': no SLO in slos.yaml selects model 'unselected'"),
    ({"name": "d"}, {}, {"listen": {"port": 0}}, "field 'listen.port': 0 (any free port)"),
    ({"name": "d"}, {}, {"traces": {"listen": {"port": 0}}},
     "sidecar.yaml: field 'traces.listen.port': 0 (any free port)"),
    ({"name": "d"}, {}, {"traces": {"listen": {"port": 9810}}},
     "sidecar.yaml: field 'traces.listen.port': 9810 is also listen.port"),
    ({"name": "d"}, {}, {"traces": {"listen": {"address": "0.0.0.0"}}},
     "traces.listen.address '0.0.0.0' is not loopback and traces.auth is not set"),
    ({"name": "d"}, {}, {"traces": {"auth": {"bearer_token_file": "token"}}},
     "sidecar.yaml: field 'traces.auth': the token and TLS files must be absolute paths"),
])
def test_bad_inputs_exit_2_naming_file_and_field(tmp_path, deployment, entry, config,
                                                 message):
    reg = _registry(tmp_path, deployment, **entry)
    cfg = yaml.safe_load((EX / "sidecar.yaml").read_text())
    cfg.update(config or {})
    cfg["registry"] = str(reg)
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(main, ["manifests", "--config", str(tmp_path / "sidecar.yaml"),
                                  "--registry", str(reg), "--slos", str(EX / "slos.yaml"),
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert not (tmp_path / "out").exists()


def test_two_entries_cannot_deploy_the_same_deployment(tmp_path):
    e = {"team": "search", "owner": "a@x", "oncall": "s",
         "deployment": {"name": "same", "namespace": "ns"}}
    reg = tmp_path / "models.yaml"
    reg.write_text(yaml.safe_dump({"models": [{"name": "ranker", "version": "1", **e},
                                              {"name": "ranker", **e}]}))
    r = CliRunner().invoke(main, ["manifests", "--config", CONFIGS[0], "--registry", str(reg),
                                  "--slos", str(EX / "slos.yaml"), "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "models[1] (name 'ranker'): field 'deployment.name': Deployment ns/same is " \
           "already deployed by models.yaml: models[0]" in r.output


# -- the image -------------------------------------------------------------------------------
def _stages(text: str) -> list[list[str]]:
    text = re.sub(r"\\\n", " ", text)
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_dockerfile_essentials():
    text = (ROOT / "Dockerfile").read_text()
    stages = _stages(text)
    assert len(stages) >= 2, "multi-stage"
    final = stages[-1]
    assert not [line for line in text.splitlines()
                if line.strip().upper().startswith("HEALTHCHECK")]
    users = [line.split()[1] for line in final if line.upper().startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root"), "non-root final user"
    entry = [line for line in final if line.upper().startswith("ENTRYPOINT")]
    assert entry == ['ENTRYPOINT ["/opt/fleetwatch/bin/fleetwatch", "serve"]']
    assert any("/etc/fleetwatch/sidecar.yaml" in line for line in final if
               line.upper().startswith("CMD"))
    assert any(line.startswith("COPY --from=builder") for line in final)
    installs = " ".join(line for line in final if line.upper().startswith("RUN"))
    for tool in ("gcc", "build-essential", "python3-pip", "python3-venv", "git", "make",
                 "python3-dev"):
        assert not re.search(rf"(?<![\w-]){re.escape(tool)}(?![\w-])", installs), tool
    assert "pip uninstall -y pip" in " ".join(stages[0])  # no pip in the copied venv
    # metrics_export: needs the otel extra; serve refuses to start without it
    builder = " ".join(stages[0])
    assert "'fleetwatch[otel]'" in builder and "'/src[otel]'" in builder


def test_runtime_imports_are_declared():
    """Every third-party module the package imports outside the demo and the Triton
    client (both need the triton extra: tritonclient) is a declared dependency: the image
    installs no extras, so an undeclared one fails at ``fleetwatch serve`` in the
    container."""
    import ast
    import importlib.metadata as md

    def norm(name: str) -> str:
        return re.split(r"[<>=!~\[ ;(]", name.strip(), maxsplit=1)[0].lower().replace("_", "-")

    block = re.search(r"^dependencies = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(),
                      re.S | re.M)
    assert block
    declared = {norm(d) for d in re.findall(r'"([^"]+)"', block.group(1))}
    todo = list(declared)  # and what they require (not their extras)
    while todo:
        try:
            reqs = md.requires(todo.pop()) or []
        except md.PackageNotFoundError:
            continue
        for r in reqs:
            if "extra ==" not in r and norm(r) not in declared:
                declared.add(norm(r))
                todo.append(norm(r))
    dists = md.packages_distributions()
    missing = {}
    for path in sorted((ROOT / "src" / "fleetwatch").rglob("*.py")):
        parts = path.relative_to(ROOT / "src" / "fleetwatch").parts
        if "demo" in parts or parts[:2] == ("clients", "triton"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "fleetwatch":
                    continue
                owners = {d.lower().replace("_", "-") for d in dists.get(top, [top])}
                if not owners & declared:
                    missing.setdefault(top, path.relative_to(ROOT).as_posix())
    assert not missing, f"imported but not in [project] dependencies: {missing}"


# -- property: any valid deployment block gives valid objects --------------------------------
_LABEL = st.from_regex(r"\A[a-z]([-a-z0-9]{0,20}[a-z0-9])?\Z")


@st.composite
def _deployments(draw):
    lo = draw(st.integers(1, 50))
    return Deployment(
        name=draw(_LABEL), namespace=draw(_LABEL),
        model=draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                           min_size=1, max_size=30).filter(lambda s: not set("*?[") & set(s))),
        version=draw(st.none() | st.text("0123456789.", min_size=1, max_size=5)),
        other_versions=tuple(draw(st.lists(st.text("0123456789.+*", min_size=1, max_size=4),
                                           max_size=3, unique=True))),
        sidecar=SidecarSpec("sidecar", "sidecar.yaml", "x: 1\n", draw(st.integers(1, 65535)),
                            1.0),
        latency_tier="standard", min_replicas=lo, max_replicas=draw(st.integers(lo, 10_000)),
        startup_seconds=draw(st.integers(10, 86400)), polling_seconds=draw(st.integers(1, 3600)),
        cooldown_seconds=draw(st.integers(0, 86400)),
        scale_down_stabilization_seconds=draw(st.integers(0, 3600)))


@settings(max_examples=unit_mode.examples(40), deadline=None)
@given(dep=_deployments(), trigger=st.sampled_from(["prometheus", "metrics-api"]))
def test_any_valid_deployment_gives_valid_objects(dep, trigger):
    s = Settings(trigger=trigger)
    so = keda_mod.scaled_object(dep, s)
    assert errors(so) == []
    assert so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"]
    merged = _strategic_merge(ENGINE, sidecar_mod.deployment_patch(dep, s, "0" * 16))
    assert errors(merged) == []
    assert errors(sidecar_mod.service(dep)) == []
    if trigger == "prometheus":  # the model name survives PromQL quoting
        q = so["spec"]["triggers"][0]["metadata"]["query"]
        assert q.startswith('sum(model:fleetwatch_autoscaling_signal:sum{model="')
        assert promql.string(dep.model) in q


def test_the_pod_spec_matches_the_sidecars_shutdown_and_state(tmp_path):
    """With ``shutdown.drain_seconds`` the grace period outlasts the drain; with
    ``state_dir`` the state volume is mounted where the pod's configuration says; a
    ``match`` naming ``${POD_NAME}`` gets it from the downward API. Without them, none."""
    def pod(extra: dict) -> tuple[dict, dict]:
        cfg = yaml.safe_load((EX / "sidecar.yaml").read_text())
        cfg.update(extra, registry=str(EX / "models.yaml"))
        path = tmp_path / "sidecar.yaml"
        path.write_text(yaml.safe_dump(cfg))
        reg = _registry(tmp_path, {"name": "d"})
        files = build(load_inputs([str(path)], str(reg), str(EX / "slos.yaml"), None),
                      Settings())[0]
        spec = yaml.safe_load(files["patches/default/d.yaml"])["spec"]["template"]["spec"]
        cm = next(d for _, d in _docs(files) if d["kind"] == "ConfigMap"
                  and d["metadata"]["name"] == "fleetwatch-sidecar")
        return spec, yaml.safe_load(cm["data"]["sidecar.yaml"])

    spec, cfg = pod({})
    assert "terminationGracePeriodSeconds" not in spec and len(spec["volumes"]) == 1
    assert "env" not in spec["containers"][0] and "state_dir" not in cfg
    for drain, grace in ((20, 35), (5, 30), (100.5, 116)):
        spec, cfg = pod({"shutdown": {"drain_seconds": drain}, "state_dir": "state",
                         "slo": {"recover": {"prometheus": "http://p:9090",
                                             "match": {"pod": "${POD_NAME}"}}}})
        assert spec["terminationGracePeriodSeconds"] == grace > drain
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["fleetwatch-state"] == cfg["state_dir"] == "/var/lib/fleetwatch"
        assert {"name": "fleetwatch-state", "emptyDir": {}} in spec["volumes"]
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
               for e in spec["containers"][0]["env"]}
        assert env["POD_NAME"] == "metadata.name"


def test_a_missing_quota_file_names_the_configuration_and_its_field(tmp_path):
    for name in ("sidecar.yaml", "sidecar-vllm.yaml", "sidecar-vllm-prefill.yaml",
                 "sidecar-vllm-decode.yaml", "models.yaml", "slos.yaml"):
        shutil.copy(EX / name, tmp_path / name)
    config = tmp_path / "sidecar-vllm.yaml"
    config.write_text(config.read_text().replace("quotas: quotas.yaml", "quotas: gone.yaml"))
    configs = [arg for c in CONFIGS for arg in ("--config", str(tmp_path / Path(c).name))]
    result = CliRunner().invoke(main, ["manifests", *configs,
                                       "--registry", str(tmp_path / "models.yaml"),
                                       "--slos", str(tmp_path / "slos.yaml"),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert (f"{config.name}: field 'quotas': {tmp_path / 'gone.yaml'}: cannot read: "
            "No such file or directory") in result.output
    assert not (tmp_path / "out").exists()
