"""The rollout comparison's arithmetic, baseline files, warm-up specs and the warm-up gate's
counter reading — pure, on hand-computed numbers (the real-server tests are
``test_rollout_triton.py`` and ``test_rollout_vllm.py``)."""

from __future__ import annotations

import logging

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.labels.registry import RegistryError, parse_registry
from fleetwatch.rollout import baseline as bl
from fleetwatch.rollout.compare import (
    BETTER,
    NO_DATA,
    SAME,
    WORSE,
    Settings,
    combine,
    compare,
    compare_slo,
    two_proportion,
    wilson,
)
from fleetwatch.rollout.export import verdict_label, version_order
from fleetwatch.rollout.summary import BandSLI, SLOSummary
from fleetwatch.sidecar.warmup import WarmupGate


def summary(version: str, bands: dict[str, tuple[float, float]], slo: str = "s",
            objective: float = 0.9) -> SLOSummary:
    return SLOSummary(slo, "m", version, "triton", "latency", objective,
                      {b: BandSLI(b, g, t) for b, (g, t) in bands.items()})


def test_wilson_and_two_proportion_match_hand_computed_values():
    lo, hi = wilson(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert wilson(0, 10)[0] == 0 and round(wilson(0, 10)[1], 4) == 0.2775
    z, p = two_proportion(50, 100, 60, 100)  # pooled 0.55: z = 0.1 / sqrt(0.55·0.45·0.02)
    assert z == pytest.approx(1.4213, abs=1e-4) and p == pytest.approx(0.1552, abs=1e-4)
    assert two_proportion(10, 10, 20, 20) == (0.0, 1.0)  # no variance: equal


def test_per_band_verdict_is_right_where_the_naive_one_is_not():
    # the same code (90 % good at low load, 30 % at high) under different load mixes
    base = summary("1", {"1": (90, 100), "8": (300, 1000), "all": (390, 1100)})
    cand = summary("2", {"1": (900, 1000), "8": (30, 100), "all": (930, 1100)})
    c = compare("m", "1", "2", [base], [cand])
    assert c.verdict == SAME and c.driving == (("s", "1"), ("s", "8"))
    (s,) = c.slos
    assert s.overall is not None and s.overall.verdict == BETTER  # naive: fooled


def test_a_worse_band_wins_and_drives_the_verdict():
    # objective 99.9 %: the margin is 0.05 pp, so a 0.9 pp better band counts
    base = summary("1", {"1": (990, 1000), "2": (900, 1000)}, objective=0.999)
    cand = summary("2", {"1": (999, 1000), "2": (700, 1000)}, objective=0.999)
    s = compare_slo(base, cand)
    assert [b.verdict for b in s.bands] == [BETTER, WORSE]
    assert s.verdict == WORSE and s.driving_bands == ("2",)
    assert s.threshold == pytest.approx(0.05 / 2)  # Bonferroni over the 2 bands compared
    assert combine([NO_DATA, SAME, BETTER]) == BETTER and combine([NO_DATA]) == NO_DATA


def test_small_or_one_sided_bands_are_not_enough_data_and_small_differences_same():
    base = summary("1", {"1": (29, 29), "2": (100, 100)})
    cand = summary("2", {"1": (0, 29), "4": (0, 100)})
    assert compare_slo(base, cand).verdict == NO_DATA
    # significant (n = 100000) but under half the error budget (5 pp at 90 %): same
    big = summary("1", {"1": (95000, 100000)})
    close = summary("2", {"1": (94000, 100000)})
    assert compare_slo(big, close).bands[0].p_value < 1e-10
    assert compare_slo(big, close).verdict == SAME
    assert compare_slo(big, close, Settings(margin=0.005)).verdict == WORSE


def test_slos_on_one_side_only_and_no_slo_in_common():
    a, b = summary("1", {"1": (90, 100)}, "a"), summary("2", {"1": (90, 100)}, "b")
    with pytest.raises(ValueError, match="none in common"):
        compare("m", "1", "2", [a], [b])
    c = compare("m", "1", "2", [a, summary("1", {"1": (9, 10)}, "b")], [b])
    assert [s.verdict for s in c.slos] == [NO_DATA, NO_DATA]


def test_baseline_round_trip_and_strict_errors(tmp_path):
    s = summary("1", {"1": (90, 100), "all": (90, 100)})
    s.bands["1"] = BandSLI("1", 90, 100, 0.01, 0.009, 0.012, 1.0)
    f = bl.build([s], "2026-12-01T12:00:00Z", "replay of 3 captures")
    path = tmp_path / "b.yaml"
    path.write_text(bl.dump(f))
    back = bl.load(path)
    assert back == f and back.summaries()[0].bands == s.bands
    assert back.name == "baseline 1 (triton)"
    text = path.read_text()
    for bad, msg in ((text.replace("good: 90", "good: 900", 1), "more than total"),
                     (text.replace("format: fleetwatch-baseline/v1", "format: v0"), "format"),
                     (text.replace("source:", "colour: red\nsource:"), "unknown field")):
        path.write_text(bad)
        with pytest.raises(bl.BaselineError, match=msg) as exc:
            bl.load(path)
        assert str(path) in str(exc.value)


@pytest.mark.parametrize("value", ["1e308", ".inf", "1.0e+300", "1.0e+16"])
def test_a_baseline_with_an_absurd_count_is_refused(tmp_path, value):
    """A count beyond 2^53 or not finite in a baseline file would compare as ``inf%``:
    refused, naming the file and the field."""
    s = summary("1", {"1": (90, 100)})
    path = tmp_path / "b.yaml"
    path.write_text(bl.dump(bl.build([s], "2026-12-01T12:00:00Z", "test")).replace(
        "total: 100.0", f"total: {value}", 1))
    with pytest.raises(bl.BaselineError, match=r"slos\[0\]\.bands\[0\]\.total") as exc:
        bl.load(path)
    assert str(path) in str(exc.value)


REG = {"name": "m", "team": "t", "owner": "o", "oncall": "c"}


@pytest.mark.parametrize(("warmup", "msg"), [
    ({"protocol": "openai", "count": 3, "inputs": [{"name": "X", "datatype": "FP32",
                                                    "shape": [4]}]}, "takes llm"),
    ({"protocol": "http", "count": 3, "llm": {"lengths": [4]}}, "takes inputs"),
    ({"protocol": "http", "count": 0, "inputs": [{"name": "X", "datatype": "FP32",
                                                  "shape": [4]}]}, "count"),
    ({"protocol": "http", "count": 3, "inputs": [{"name": "X", "datatype": "FLOAT",
                                                  "shape": [4]}]}, "datatype 'FLOAT'"),
    ({"protocol": "grpc", "count": 3, "inputs": [{"name": "X", "datatype": "FP32",
                                                  "shape": [-1]}]}, "positive size"),
    ({"protocol": "openai", "count": 3, "llm": {"lengths": [4], "weights": [1, 2]}},
     "2 weights for 1 lengths"),
    ({"protocol": "openai", "count": 3, "gate": "maybe", "llm": {"lengths": [4]}}, "gate"),
    ({"protocol": "openai", "count": 3, "llm": {"lengths": [4], "weights": [float("inf")]}},
     "finite"),
    ({"protocol": "grpc", "count": 3, "inputs": [{"name": "X", "datatype": "FP32",
                                                  "shape": [10**400]}]}, "at most"),
    ({"protocol": "grpc", "count": 3, "batch_sizes": [10**400],
      "inputs": [{"name": "X", "datatype": "FP32", "shape": [4]}]}, "batch_sizes"),
])
def test_warmup_spec_errors_name_the_entry_and_field(warmup, msg):
    with pytest.raises(RegistryError, match=msg) as exc:
        parse_registry({"models": [{**REG, "warmup": warmup}]}, "reg.yaml")
    assert "reg.yaml: models[0] (name 'm'): field 'warmup" in str(exc.value)


def _snap(ts: float, successes: float) -> Snapshot:
    text = (f'nv_inference_request_success{{model="m",version="1"}} {successes}\n'
            'nv_inference_request_failure{model="m",version="1",reason="OTHER"} 7\n')
    return Snapshot(ts, {"triton": Normalizer(TABLES["triton"]).normalize(text)})


def test_warm_up_gate_counts_successes_since_the_server_started(caplog):
    reg = parse_registry({"models": [{**REG, "warmup": {
        "gate": "required", "protocol": "http", "count": 5,
        "inputs": [{"name": "X", "datatype": "FP32", "shape": [4]}]}}]})
    gate = WarmupGate(reg)
    assert gate.not_warm("triton", ["m"]) == ["m"]  # no counter seen: cold
    gate.observe(_snap(1, 4))
    assert gate.not_warm("triton", ["m"]) == ["m"]  # failures (7) do not count
    with caplog.at_level(logging.INFO, "fleetwatch.warmup"):
        gate.observe(_snap(2, 5))
        assert gate.not_warm("triton", ["m"]) == []
        gate.observe(_snap(3, 2))  # a restart: the counter reset
    assert gate.not_warm("triton", ["m"]) == ["m"]
    assert "warm: 5 successful requests" in caplog.text
    assert "request counter reset (server restarted)" in caplog.text
    gate.observe(Snapshot(4, {"triton": None}))  # down: nothing kept
    assert gate.warm == {} and gate.not_warm("triton", ["m"]) == ["m"]
    assert gate.not_warm("triton", ["(engine)"]) == []  # vLLM's pseudo-model is no model


def test_verdict_labels_and_version_order():
    assert verdict_label(NO_DATA) == "not_enough_data" and verdict_label(WORSE) == "worse"
    assert sorted(["10", "2", "b", "1", "a"], key=version_order) == ["1", "2", "10", "a", "b"]


def test_sidecar_verdict_per_candidate_against_the_oldest_version():
    from fleetwatch.rollout.export import RolloutCollector, live_pairs
    from fleetwatch.slo.engine import SLOEngine, SLOModelState
    from fleetwatch.slo.spec import parse_slo_file
    from fleetwatch.slo.state import ModelKey

    spec = parse_slo_file({"slos": [{
        "name": "avail", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
        "timeWindow": [{"duration": "28d"}], "concurrency": {"envelope": 4, "bands": [1, 4]}}]})
    engine = SLOEngine(spec)
    rows, goods, totals = [], [], []
    for model, version, good in (("m", "10", 900), ("m", "2", 1000), ("m", "3", 1000),
                                 ("solo", "1", 1000)):
        st = SLOModelState(spec.slos[0], ModelKey(model, version, "triton"))
        for band in ("1", "all"):
            st.events[band], st.good[band] = 5000, 5000  # since start: not what is compared
            rows.append(engine.ledger.row(st, band))
            goods.append(good)
            totals.append(1000)
        engine.states[("avail", st.model)] = st
    engine.ledger.add(1000.0, rows, goods, totals)  # the SLO period's window: compared
    assert live_pairs(engine) == [("m", "triton", "2", "3"), ("m", "triton", "2", "10")]
    (fam,) = RolloutCollector(engine).collect()
    on = {(s.labels["candidate"], s.labels["verdict"]) for s in fam.samples if s.value == 1}
    assert on == {("3", "same"), ("10", "worse")}
    assert len(fam.samples) == 2 * 4  # one-hot over the four verdicts


@pytest.mark.parametrize(("args", "msg"), [
    (["--prometheus", "http://127.0.0.1:1", "--range", "x]"], "--range: invalid duration"),
    ([], "give --prometheus URL, or --slos FILE with captures"),
    (["--captures", "c/"], "captures need --slos FILE"),
    (["--prometheus", "http://127.0.0.1:1", "--captures", "c/"], "not both"),
    (["--prometheus", "http://127.0.0.1:1", "--baseline", "/nonexistent.yaml"],
     "/nonexistent.yaml: cannot read baseline"),
])
def test_compare_bad_input_is_one_line_and_exit_2(args, msg):
    from click.testing import CliRunner

    from fleetwatch.cli import main

    base = [] if "--baseline" in args else ["--baseline-version", "1"]
    res = CliRunner().invoke(main, ["compare", "--model", "m", *base,
                                    "--candidate-version", "2", *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("fleetwatch: error:") and msg in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_pick_a_version_and_its_backend():
    from fleetwatch.commands.compare import CompareInputError, pick

    both = [SLOSummary("s", "m", "1", "triton"), SLOSummary("s", "m", "1", "vllm"),
            SLOSummary("s", "m", "2", "vllm")]
    assert [s.backend for s in pick(both, "m", "1", "P", "vllm")] == ["vllm"]
    assert [s.backend for s in pick(both, "m", "2", "P")] == ["vllm"]
    with pytest.raises(CompareInputError, match=r"several backends in P \('triton', "
                                                r"'vllm'\): give --candidate-backend"):
        pick(both, "m", "1", "P")
    with pytest.raises(CompareInputError, match="no backend 'sglang' in P"):
        pick(both, "m", "1", "P", "sglang")
    with pytest.raises(CompareInputError, match=r"no version '3' in P \(versions: '1', '2'\)"):
        pick(both, "m", "3", "P")


def test_warmup_plans_from_the_example_configuration():
    from fleetwatch.commands.warmup import WarmupInputError, plans
    from fleetwatch.labels.registry import load_registry
    from fleetwatch.sidecar.config import load_config
    from tests.support.helpers import ROOT

    cfg = load_config(ROOT / "examples" / "sidecar-vllm.yaml")
    reg = load_registry(ROOT / "examples" / "models.yaml")
    with pytest.raises(WarmupInputError, match=r"'llama-\*' .* is a glob that matches no "
                                               r"model a target lists: give --model NAME"):
        plans(cfg, reg, None)
    (plan,) = plans(cfg, reg, "llama-3-8b")
    assert plan.url == "http://127.0.0.1:8000" and plan.spec.llm is not None  # vLLM's port
    with pytest.raises(WarmupInputError, match=r"ranker: its registry entry .* no warmup"):
        plans(cfg, reg, "ranker")
    grpc = parse_registry({"models": [{**REG, "warmup": {
        "protocol": "grpc", "count": 1,
        "inputs": [{"name": "X", "datatype": "FP32", "shape": [1]}]}}]})
    with pytest.raises(WarmupInputError, match=r"grpc needs warmup\.url"):
        plans(cfg, grpc, "m")


def test_a_side_without_a_version_is_named_by_its_model(tmp_path):
    """vLLM's series have no model version (``""``): compare names such a side by the model
    alone, live or from a baseline file, and a version as given."""
    from click.testing import CliRunner

    from fleetwatch.cli import main
    from tests.support.helpers import ROOT
    assert bl.side_name("m", "2", None) == "2"
    assert bl.side_name("m", "2", "vllm") == "2 (vllm)"
    assert bl.side_name("tiny-llm", "", "vllm") == "tiny-llm (vllm)"
    slos = tmp_path / "slos.yaml"
    slos.write_text("slos:\n  - name: avail\n    selector: {models: [tiny-llm]}\n"
                    "    sli: {availability: {}}\n    objectives: [{target: 0.99}]\n"
                    "    timeWindow: [{duration: 30d}]\n    concurrency: {envelope: 8}\n")
    captures = sorted((ROOT / "tests" / "data" / "vllm-sweep" / "captures").glob("*.prom"))
    src = ["--model", "tiny-llm", "--slos", str(slos),
           *(a for c in captures[:6] for a in ("--captures", str(c)))]
    base = tmp_path / "base.yaml"
    r = CliRunner().invoke(main, ["baseline", "record", *src, "--version", "",
                                  "--out", str(base)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["compare", *src, "--baseline", str(base),
                                  "--candidate-version", ""])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("tiny-llm: candidate tiny-llm vs baseline tiny-llm (vllm): ")
    r = CliRunner().invoke(main, ["compare", *src, "--baseline-version", "",
                                  "--candidate-version", "", "--candidate-backend", "vllm"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("tiny-llm: candidate tiny-llm (vllm) vs tiny-llm: ")
