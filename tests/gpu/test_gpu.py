"""Shared GPUs (fleetwatch.gpu): quota usage from captured dcgm-exporter, Triton and vLLM
expositions and a declared placement against a hand computation, the quota file's errors,
placement discovery, footprints, the placement policy and the rollout memory plan.

The inputs are real captures (tests/fixtures/expositions, tests/data/gpu/triton-2.51-*
from the demo Triton) and the declarations of tests/data/gpu (sidecar.yaml, registry.yaml,
quotas.yaml). Where a capture lacks a case (a KIND_GPU instance group, a backend that fills
memory_usage, dcgm-exporter's pod mapping with a pod) a copy of the real document is
changed in the test, and says so.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.commands.gpu_inputs import load_assessment
from fleetwatch.commands.quota import over_quota
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.sources import TABLES
from fleetwatch.gpu.assess import assess, exposition
from fleetwatch.gpu.discover import gpu_instances, instance_groups, memory_usage, scan_exposition
from fleetwatch.gpu.discovered import TargetFacts
from fleetwatch.gpu.quota import QuotaError, load_quotas, parse_quotas
from fleetwatch.labels.placement import GPUPlacement, PlacedModel, Placement
from fleetwatch.labels.registry import load_registry
from tests.support.helpers import FIXTURES, ROOT

DATA = ROOT / "tests" / "data" / "gpu"
L4 = FIXTURES / "dcgm" / "dcgm-exporter-gpu-operator-2026-03-kops-L4-default-counters.prom"
VLLM = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-under-load.prom"
TRITON_UUID = FIXTURES / "triton" / "triton-2021-prometheus-docs-pr1953-gpu_uuid-two-versions-partial.prom"
P100 = FIXTURES / "triton" / "triton-2.24.0-22.07-P100-three-models-after-inference.prom"
CAPTURES = [str(p) for p in (L4, VLLM, TRITON_UUID, P100)]
L4_UUID = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
T_UUID = "GPU-a763c375-aefc-7f0c-76da-1c5554011402"
P100_UUID = "GPU-a07dfe08-b87f-1f96-7083-07a26d0fa83e"
GIB = 1 << 30


def _assessment():
    return load_assessment(str(DATA / "sidecar.yaml"), None, CAPTURES, (), ())


def test_quota_usage_matches_hand_computation() -> None:
    a = _assessment()
    # the L4: dcgm-exporter FB_FREE 22563 + FB_USED 0 + FB_RESERVED 470 MiB
    l4 = (22563 + 0 + 470) * 2**20
    assert l4 == 24_151_851_008 and a.gpus.total[L4_UUID].bytes == l4
    # tiny-llm (vLLM 0.32 capture): gpu_memory_utilization 0.92 of the L4
    llm = int(0.92 * l4)
    ranker = 1 * GIB  # registry catch-all entry of ranker (version 1 is placed)
    assert a.feet[("tiny-llm", "", L4_UUID)].bytes == llm == 22_219_702_927
    assert a.feet[("tiny-llm", "", L4_UUID)].code == "vllm_reservation"
    assert a.feet[("ranker", "1", L4_UUID)].code == "registry"
    # inception_v3 versions 42 and 43 discovered on GPU-a763… from Triton's gpu_uuid
    assert [(m.model, m.model_version, m.instances) for m in a.placement.models_on(T_UUID)] \
        == [("inception_v3", "42", 1), ("inception_v3", "43", 1)]
    expected = {
        ("llm", "gpus"): llm / (llm + ranker),
        ("llm", "gpu_memory_bytes"): llm, ("llm", "instances"): 1,
        ("search", "gpus"): ranker / (llm + ranker),
        ("search", "gpu_memory_bytes"): ranker, ("search", "instances"): 2,
        ("vision", "gpus"): 1, ("vision", "gpu_memory_bytes"): 2 * GIB,
        ("vision", "instances"): 2,
        ("physics", "gpus"): 1, ("physics", "gpu_memory_bytes"): GIB // 2,
        ("physics", "instances"): 1,
    }
    got = {(t, r): v for t, rs in a.usage.teams.items() for r, v in rs.items()}
    assert got == pytest.approx(expected, rel=1e-15)
    text = exposition(a)
    assert 'fleetwatch_quota_usage{team="llm",resource="gpu_memory_bytes"} 22219702927\n' in text
    assert f'fleetwatch_quota_usage{{team="search",resource="gpus"}} {ranker / (llm + ranker)!r}' \
        in text
    assert 'fleetwatch_quota_limit{team="search",resource="gpus"} 1\n' in text
    assert ('fleetwatch_quota_model_usage{team="search",model="ranker",resource="instances"} 2'
            in text)
    # ranker is declared, served by no capture: no backend label
    assert (f'modelserver_model_placement{{model="ranker",model_version="1",gpu_uuid="{L4_UUID}",'
            'instances="2"} 1') in text
    assert (f'modelserver_model_memory_footprint_bytes{{model="tiny-llm",model_version="",'
            f'backend="vllm",gpu_uuid="{L4_UUID}",footprint_source="vllm_reservation"}} '
            '22219702927') in text
    assert ('modelserver_model_placement{model="inception_v3",model_version="42",'
            f'backend="triton",gpu_uuid="{T_UUID}",instances="1"}} 1') in text
    assert over_quota(a) == ["llm gpus", "search gpu_memory_bytes", "search ranker instances",
                             "vision instances"]


def test_quota_usage_command_flags_each_team_over_quota() -> None:
    r = CliRunner().invoke(main, ["quota", "usage", "--config", str(DATA / "sidecar.yaml"),
                                  *[x for c in CAPTURES for x in ("--captures", c)]])
    assert r.exit_code == 1, r.output
    over = [line.split()[:2] for line in r.output.splitlines() if "OVER" in line]
    assert over == [["llm", "gpus"], ["search", "gpu_memory_bytes"], ["search", "/"],
                    ["vision", "instances"]]
    assert f"GPU {L4_UUID}: split by footprint" in r.output


def test_quota_usage_without_a_quota_file_says_what_is_missing(tmp_path) -> None:
    """No quota file and no model to count: one error line naming the options, exit 2 (bad
    input), not an empty table. No quota file but a placement: the usage, a note, exit 0."""
    r = CliRunner().invoke(main, ["quota", "usage"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("fleetwatch: error: quota usage: nothing to report: no quota "
                               "file (give --quotas FILE") and len(r.stderr.splitlines()) == 1
    cfg = tmp_path / "sidecar.yaml"
    cfg.write_text((DATA / "sidecar.yaml").read_text()
                   .replace("quotas: quotas.yaml\n", "")
                   .replace("registry: registry.yaml", f"registry: {DATA / 'registry.yaml'}"))
    r = CliRunner().invoke(main, ["quota", "usage", "--config", str(cfg)])
    assert r.exit_code == 0, r.output
    assert [line.split()[:2] for line in r.stdout.splitlines()][1] == ["llm", "gpus"]
    assert "usage only, no limits" in r.stderr


def test_quota_usage_with_nothing_to_count_says_why_the_usage_is_zero() -> None:
    """A quota file but no placement and no captures: the limits, every usage 0, and one
    line on stderr saying that nothing was counted (not a silent table of zeros)."""
    r = CliRunner().invoke(main, ["quota", "usage", "--quotas", str(DATA / "quotas.yaml"),
                                  "--registry", str(DATA / "registry.yaml")])
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert rows and all(row[-2] == "0" for row in rows), r.stdout
    assert r.stderr == ("fleetwatch: no usage counted: no model is on a GPU in a "
                        "--config's placement: or in the --captures, so every usage is 0 "
                        "(limits only)\n")
    r = CliRunner().invoke(main, ["quota", "usage", "--config", str(DATA / "sidecar.yaml"),
                                  *[x for c in CAPTURES for x in ("--captures", c)]])
    assert "no usage counted" not in r.stderr


def test_unknown_footprint_splits_the_gpu_by_instances() -> None:
    reg = load_registry(DATA / "registry.yaml")
    placement = Placement([GPUPlacement(gpu_uuid="G", models=[
        PlacedModel(model="ranker", instances=3), PlacedModel(model="tiny-llm")])])
    a = assess(placement, [], [], reg)  # tiny-llm: no capture, no registry footprint
    assert a.usage.split_by == {"G": "instances"}
    assert a.usage.teams["search"]["gpus"] == 0.75 and a.usage.teams["llm"]["gpus"] == 0.25
    assert a.usage.unknown_footprint == [("tiny-llm", "", "G")]


@pytest.mark.parametrize(("text", "message"), [
    ("teams: {search: {gpus: 1, gpu_memory_bytes: 10}}",
     "q.yaml: team 'search': field 'instances': Field required"),
    ("teams: {search: {gpus: true, gpu_memory_bytes: 10, instances: 1}}",
     "q.yaml: team 'search': field 'gpus': expected a number (not a boolean or text)"),
    ("teams: {search: {gpus: 1, gpu_memory_bytes: 1.5, instances: 1}}",
     "q.yaml: team 'search': field 'gpu_memory_bytes': Input should be a valid integer"),
    ("teams: {search: {gpus: -1, gpu_memory_bytes: 1, instances: 1}}",
     "q.yaml: team 'search': field 'gpus': Input should be greater than or equal to 0"),
    ("teams: {search: {gpus: 1, gpu_memory_bytes: 1, instances: 1, gpu: 2}}",
     "q.yaml: team 'search': field 'gpu': unknown field"),
    ("teams: {search: {gpus: 1, gpu_memory_bytes: 1, instances: 1, "
     "models: {ranker: {instances: x}}}}",
     "q.yaml: team 'search': field 'models.ranker.instances': Input should be a valid integer"),
    ("teams: {search: {gpus: 1, gpu_memory_bytes: 1, instances: 1, models: {ranker: {}}}}",
     "q.yaml: team 'search': field 'models.ranker': no cap"),
    ("teams: {search: 3}", "q.yaml: team 'search': expected a mapping"),
    ("teams: {}", "q.yaml: field 'teams': Dictionary should have at least 1 item"),
    ("- a", "q.yaml: expected a mapping with a 'teams:' mapping"),
    ("teams: [", "q.yaml: not valid YAML"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e]\n"
     "g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
     "q.yaml: too many YAML nodes once aliases are expanded"),
])
def test_bad_quota_files_name_file_team_and_field(tmp_path: Path, text: str,
                                                  message: str) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(text)
    with pytest.raises(QuotaError) as err:
        load_quotas(path)
    assert str(err.value).replace(str(tmp_path) + "/", "").startswith(message), str(err.value)
    r = CliRunner().invoke(main, ["quota", "check", str(path)])
    assert r.exit_code == 2 and "fleetwatch: error: " in r.output


def test_quota_check_accepts_the_test_file() -> None:
    r = CliRunner().invoke(main, ["quota", "check", str(DATA / "quotas.yaml")])
    assert r.exit_code == 0 and "ok (4 teams, 1 per-model cap)" in r.output
    assert parse_quotas({"teams": {"t": {"gpus": 0.5, "gpu_memory_bytes": 0,
                                         "instances": 0}}}).teams["t"].gpus == 0.5


def test_triton_documents_of_the_real_server() -> None:
    config = json.loads((DATA / "triton-2.51-ranker-config.json").read_text())
    stats = json.loads((DATA / "triton-2.51-ranker-stats.json").read_text())
    groups = instance_groups(config)
    assert groups is not None and [(g.kind, g.count) for g in groups] == [("KIND_CPU", 1)]
    assert gpu_instances(groups) == {}  # the demo's Python models are not on a GPU
    assert memory_usage(stats) == {}  # Triton 2.51's Python backend reports no memory
    # changed copies: a KIND_GPU group on GPU 0, and a backend that fills memory_usage
    gpu_config = copy.deepcopy(config)
    gpu_config["instance_group"][0].update(kind="KIND_GPU", count=2, gpus=[0])
    gpu_stats = copy.deepcopy(stats)
    gpu_stats["model_stats"][1]["memory_usage"] = [{"type": "GPU", "id": 0,
                                                    "byte_size": 123_456_789},
                                                   {"type": "CPU", "id": 0, "byte_size": 7}]
    dcgm = L4.read_text()
    n = Normalizer(TABLES["dcgm"]).normalize(dcgm)
    a = assess(Placement(), [n], [TargetFacts("triton", {("ranker", "2")},
                                              configs={"ranker": gpu_config})],
               load_registry(DATA / "registry.yaml"), triton_stats={"ranker": gpu_stats})
    assert list(a.placement.rows()) == [("ranker", "", L4_UUID, 2)]  # dcgm gpu="0" → UUID
    fig = a.feet[("ranker", "", L4_UUID)]
    assert (fig.bytes, fig.code) == (123_456_789, "triton_statistics")


def test_dcgm_pod_mapping_places_standalone_vllm() -> None:
    # the L4 capture has no pod labels: a copy with the pod-resources mapping on
    text = L4.read_text().replace('Hostname="host-a"',
                                  'Hostname="host-a",namespace="llm",pod="vllm-0",container="vllm"')
    n = Normalizer(TABLES["dcgm"]).normalize(text)
    vllm = TargetFacts("vllm", {("tiny-llm", "")}, scan_exposition(VLLM.read_text()))
    reg = load_registry(DATA / "registry.yaml")
    found = assess(Placement(), [n], [vllm], reg, pod=("llm", "vllm-0"))
    assert list(found.placement.rows()) == [("tiny-llm", "", L4_UUID, 1)]
    assert found.feet[("tiny-llm", "", L4_UUID)].code == "vllm_reservation"
    assert not list(assess(Placement(), [n], [vllm], reg, pod=("llm", "other")).placement.rows())


def test_scan_reads_vllm_cache_config_and_triton_gpu_uuid() -> None:
    v = scan_exposition(VLLM.read_text())
    assert [(c["gpu_memory_utilization"], c["kv_cache_memory_bytes"]) for c in v.vllm_cache] \
        == [("0.92", "1073741824")]
    t = scan_exposition(TRITON_UUID.read_text())
    assert t.triton_gpus == {("inception_v3", "43"): {T_UUID}, ("inception_v3", "42"): {T_UUID}}
    assert scan_exposition(P100.read_text()).triton_gpus == {}  # only nv_gpu_* carry it


def test_overlaid_keeps_declared_neighbours() -> None:
    declared = Placement([GPUPlacement(gpu_uuid="G", memory_bytes=10, models=[
        PlacedModel(model="a"), PlacedModel(model="b")])])
    found = Placement([GPUPlacement(gpu_uuid="G", models=[
        PlacedModel(model="a", model_version="3", instances=2)]),
        GPUPlacement(gpu_uuid="H", models=[PlacedModel(model="c")])])
    p = declared.overlaid(found)
    assert list(p.rows()) == [("b", "", "G", 1), ("a", "3", "G", 2), ("c", "", "H", 1)]
    assert p.gpu("G").memory_bytes == 10  # type: ignore[union-attr]


def test_placement_policy_in_validate(tmp_path: Path) -> None:
    cfg = (DATA / "sidecar.yaml").read_text().replace(
        "      - {model: inception_v3}", "      - {model: inception_v3}\n      - {model: ranker}")
    path = tmp_path / "sidecar.yaml"
    path.write_text(cfg.replace("registry.yaml", str(DATA / "registry.yaml"))
                    .replace("quotas.yaml", str(DATA / "quotas.yaml")))
    r = CliRunner().invoke(main, ["validate", "--config", str(path)])
    assert r.exit_code == 1
    assert (f"placement policy: model inception_v3 (version '', latency tier interactive) "
            f"shares GPU {T_UUID} with ranker") in r.output
    ok = CliRunner().invoke(main, ["validate", "--config", str(DATA / "sidecar.yaml")])
    assert ok.exit_code == 0, ok.output  # two versions of inception_v3 are no violation
    a = load_assessment(str(path), None, CAPTURES, (), ())
    assert ('fleetwatch_placement_violation{model="inception_v3",model_version="42",'
            f'gpu_uuid="{T_UUID}",latency_tier="interactive"}} 1') in exposition(a)


def _plan(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["rollout", "plan", *args, "--config",
                                  str(DATA / "sidecar.yaml"),
                                  *[x for c in CAPTURES for x in ("--captures", c)]])
    return r.exit_code, r.output


def test_rollout_plan_refuses_what_does_not_fit() -> None:
    code, out = _plan("--model", "ranker", "--candidate", "2")
    assert code == 1
    lines = out.splitlines()
    # the arithmetic, line by line, with each figure's source
    assert "22,219,702,927 B" in lines[2] and "gpu_memory_utilization 0.92" in lines[2]
    assert lines[3].lstrip().startswith("+") and "1,073,741,824 B" in lines[3] \
        and "ranker version 1 loaded" in lines[3] and "registry gpu_memory_bytes" in lines[3]
    assert "3,221,225,472 B" in lines[4] and "candidate ranker version 2" in lines[4]
    peak = 22_219_702_927 + 1_073_741_824 + 3_221_225_472
    assert " ".join(lines[5].split()).startswith(f"= {peak:,} B") and "peak" in lines[5]
    assert "24,151,851,008 B" in lines[6] and "DCGM_FI_DEV_FB_FREE" in lines[6]
    assert f"24,151,851,008 − {peak:,} = {24_151_851_008 - peak:,} B" in lines[7]
    assert lines[-1] == f"verdict: does NOT fit on {L4_UUID}"


def test_rollout_plan_fits_on_measured_memory() -> None:
    code, out = _plan("--model", "particlenet_PT", "--candidate", "2")
    assert code == 0, out
    assert "699,400,192 B" in out and "Triton nv_gpu_memory_used_bytes" in out
    assert f"12,884,901,888 − {699_400_192 + GIB:,} = {12_884_901_888 - 699_400_192 - GIB:,}" \
        in out
    assert out.splitlines()[-1] == "verdict: fits on every GPU"


@pytest.mark.parametrize(("model", "candidate", "message"), [
    ("nope", "2", "model 'nope' is placed on no GPU"),
    ("tiny-llm", "9", "model 'tiny-llm' version '9': no footprint known"),
    ("ranker", "1", "model 'ranker' version '1' is already loaded on GPU"),
])
def test_rollout_plan_errors(model: str, candidate: str, message: str) -> None:
    code, out = _plan("--model", model, "--candidate", candidate)
    assert code == 2 and f"fleetwatch: error: {message}" in out


@pytest.mark.parametrize(("value", "message"), [
    (True, "Input should be a valid integer"), (-1, "greater than 0"),
    ("8GB", "Input should be a valid integer"), (1.5, "Input should be a valid integer")])
def test_registry_footprint_is_strict(value: object, message: str) -> None:
    from fleetwatch.labels.registry import RegistryError, parse_registry

    entry = {"name": "m", "team": "t", "owner": "o", "oncall": "c", "gpu_memory_bytes": value}
    with pytest.raises(RegistryError) as err:
        parse_registry({"models": [entry]}, "r.yaml")
    assert str(err.value).startswith("r.yaml: models[0] (name 'm'): field 'gpu_memory_bytes'")
    assert message in str(err.value)


def test_serve_and_validate_refuse_a_bad_quota_file(tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text("teams: {search: {gpus: 1, instances: 1}}\n")
    cfg = tmp_path / "s.yaml"
    cfg.write_text("quotas: q.yaml\ntargets: [{name: t, url: 'http://127.0.0.1:1/metrics'}]\n")
    for args in (["validate", "--config", str(cfg)], ["serve", "--config", str(cfg)]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, r.output
        assert (f"{cfg}: quotas: {tmp_path / 'q.yaml'}: team 'search': field "
                "'gpu_memory_bytes': Field required") in r.output


def test_footprint_measured_at_load_time() -> None:
    """A version appearing on a GPU (Triton's gpu_uuid lines) while the GPU's memory in use
    (the L4 capture's FB_USED, changed from 0 to 2048 MiB in a copy) rises: its footprint is
    the delta, ahead of the registry's 1 GiB."""
    from fleetwatch.gpu.loads import LoadDeltas

    reg = load_registry(DATA / "registry.yaml")
    dcgm = Normalizer(TABLES["dcgm"])
    before = L4.read_text()
    after = before.replace("DCGM_FI_DEV_FB_USED{", "DCGM_FI_DEV_FB_USED{").replace(
        'DCGM_FI_DRIVER_VERSION="580.105.08"} 0\n', 'DCGM_FI_DRIVER_VERSION="580.105.08"} 2048\n')
    assert after != before
    placed = "\n".join(line for line in TRITON_UUID.read_text().replace(T_UUID, L4_UUID)
                        .splitlines() if 'version="42"' not in line)  # one version appears
    loads, figures = LoadDeltas(), []
    for dcgm_text, triton_text in [(before, "")] + [(after, placed)] * 5:
        triton = TargetFacts("triton", {("inception_v3", "43")}, scan_exposition(triton_text))
        a = assess(Placement(), [dcgm.normalize(dcgm_text)], [triton], reg,
                   load_deltas=loads.deltas)
        loads.observe(((m, v, u) for m, v, u, _n in a.placement.rows()), a.gpus.used)
        fig = a.feet.get(("inception_v3", "43", L4_UUID))
        figures.append((fig.bytes, fig.code) if fig else None)
    # no placement first; the registry's figure while the load settles; then the delta
    assert figures == [None, (GIB, "registry"), (GIB, "registry"), (GIB, "registry"),
                       (2 * GIB, "load_delta"), (2 * GIB, "load_delta")]
    loads.observe([], a.gpus.used)  # the version is gone: its figure is forgotten
    assert loads.deltas == {}


def test_load_deltas_refuse_ambiguous_loads() -> None:
    from fleetwatch.gpu.facts import Figure
    from fleetwatch.gpu.loads import LoadDeltas

    loads = LoadDeltas()
    loads.observe([], {"G": Figure(100, "m")})  # first observation
    two = [("a", "1", "G"), ("b", "1", "G")]
    for _ in range(4):
        loads.observe(two, {"G": Figure(300, "m")})
    assert loads.deltas == {}  # two versions at once on one GPU: who took what?
    for _ in range(4):
        loads.observe([*two, ("c", "1", "G")], {"G": Figure(250, "m")})
    assert loads.deltas == {}  # memory in use fell: no positive delta


def test_example_quota_file() -> None:
    q = CliRunner().invoke(main, ["quota", "check", str(ROOT / "examples" / "quotas.yaml")])
    assert q.exit_code == 0 and "ok (2 teams, 1 per-model cap)" in q.output


@pytest.mark.parametrize(("files", "message"), [
    ({"c.prom": "<html>login</html>\n"}, "c.prom: not a /metrics body of a known source"),
    ({"c.prom": b"\xff\xfe"}, "c.prom: not UTF-8 text"),
    ({"s.json": "{not json"}, "s.json: not JSON"),
    ({"s.json": '{"model_stats": []}'}, "s.json: not a Triton model statistics document"),
])
def test_plan_inputs_errors_name_the_file(tmp_path: Path, files: dict[str, object],
                                          message: str) -> None:
    args = ["rollout", "plan", "--model", "m", "--candidate", "2"]
    for name, body in files.items():
        path = tmp_path / name
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(str(body))
        args += ["--triton-stats" if name.endswith(".json") else "--captures", str(path)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and f"fleetwatch: error: {tmp_path}/{message}" in r.output, r.output
    missing = CliRunner().invoke(main, [*args[:6], "--captures", str(tmp_path / "nope.prom")])
    assert missing.exit_code == 2 and "nope.prom: cannot read" in missing.output


def test_body_observer_wants_triton_and_vllm_only() -> None:
    from fleetwatch.sidecar.config import parse_config
    from fleetwatch.sidecar.gpu_facts import GPUAccounting
    from fleetwatch.sidecar.targets import TargetState

    cfg = parse_config({"targets": [{"name": "t", "url": "http://127.0.0.1:1/metrics"}]})
    st = TargetState(cfg.targets[0])
    wants = []
    for kind in ("triton", "vllm", "dcgm", "sglang", None):
        st.kind = kind
        wants.append(GPUAccounting.wants_body(st))
    assert wants == [True, True, False, False, False]


def test_scan_is_bounded() -> None:
    line = 'nv_inference_count{{gpu_uuid="GPU-{i}",model="m{i}",version="1"}} 1\n'
    body = "".join(line.format(i=i) for i in range(30_000))
    facts = scan_exposition(body, max_lines=10_000)
    assert len(facts.triton_gpus) == 10_000


@pytest.mark.parametrize(("capture", "old", "new"), [
    (VLLM, 'gpu_memory_utilization="0.92"', 'gpu_memory_utilization="1e308"'),
    (L4, "} 22563\n", "} 1e308\n"),  # DCGM_FI_DEV_FB_FREE of the L4, MiB
], ids=["vllm-utilization", "dcgm-fb-free"])
def test_absurd_memory_from_a_server_gives_no_figure_not_an_overflow(tmp_path, capture, old,
                                                                     new) -> None:
    """A copy of a real capture with one memory figure changed to 1e308 (finite, so the
    normalizer keeps it): times the GPU's memory, or summed with the other FB figures, it
    is infinite. ``quota usage`` ended in an ``OverflowError``; now the figure is left out
    (the next source of the footprint counts) and the command reports as usual."""
    text = Path(capture).read_text()
    assert old in text
    bad = tmp_path / Path(capture).name
    bad.write_text(text.replace(old, new, 1))
    captures = [str(bad) if c == str(capture) else c for c in CAPTURES]
    r = CliRunner().invoke(main, ["quota", "usage", "--config", str(DATA / "sidecar.yaml"),
                                  *[x for c in captures for x in ("--captures", c)]])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 1, r.output  # teams over quota, as with the real captures
    assert "e+308" not in r.output and not re.search(r"\binf\b", r.output.lower())
    line = next(x for x in r.output.splitlines() if x.startswith("footprint tiny-llm"))
    assert "kv_cache_memory_bytes" in line, line  # the next source of the footprint


def test_a_triton_stats_document_with_an_absurd_byte_size_is_skipped() -> None:
    """``memory_usage`` reads a server's JSON: a ``byte_size`` beyond 2^60 (10^400 is valid
    JSON) is skipped like a malformed entry, and a sum stops at the bound."""
    from fleetwatch.labels.placement import MAX_MEMORY_BYTES

    def stats(*sizes: int) -> dict:
        return {"model_stats": [{"version": "1", "memory_usage": [
            {"type": "GPU", "id": 0, "byte_size": s} for s in sizes]}]}

    assert memory_usage(stats(10**400, 1024)) == {("1", 0): 1024}
    assert memory_usage(stats(MAX_MEMORY_BYTES, MAX_MEMORY_BYTES)) == {("1", 0): MAX_MEMORY_BYTES}
