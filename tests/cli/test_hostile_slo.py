"""SLO files at the edges — objectives such as "99.99%", tiny thresholds, year-long periods,
windows as long as the period, one-band envelopes — through ``fleetwatch rules`` (promtool
checks and runs the behaviour tests), the dashboards and ``fleetwatch slo validate``:
numbers come out exactly as written, and what cannot be expressed is a clean exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.alerts.test_hostile_rules import check_rules, generate, run, tool

AVAIL = {"name": "a", "sli": {"availability": {}}, "objectives": [{"target": 0.999}],
         "timeWindow": [{"duration": "30d"}], "concurrency": {"envelope": 1, "bands": [1]}}
MODELS = [{"name": "m", "team": "t", "owner": "o", "oncall": "c"}]


def slo(**fields: object) -> dict:
    return {**AVAIL, **fields}


def test_year_long_windows_give_runnable_behaviour_tests(tmp_path):
    """A 365d/1d tier over a 365d period, one band, the envelope on the highest band: the
    multiwindow behaviour test once asked promtool to evaluate 366 days of minutes
    (``query processing would load too many samples``); it is left out beyond 4 days."""
    spec = {"windows": [{"long": "365d", "short": "1d", "budget_consumed": 1}],
            "slos": [slo(objectives=[{"target": "99.99%"}], timeWindow=[{"duration": "365d"}])]}
    out = generate(tmp_path, MODELS, spec, tests=True)
    check_rules(out)
    res = run(tool("promtool"), "test", "rules", "fleetwatch.rules.test.yml", cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_tiny_numbers_are_not_rounded_to_zero(tmp_path):
    """Numbers were rounded to 12 decimal places: an objective of 0.9999999999999 gave
    ``/ 0`` (every burn rate +Inf) and a 1e-13 s queue-wait threshold ``> 0``."""
    from fleetwatch.alerts.generate import PLATFORM_FILE, SLO_FILE
    from fleetwatch.alerts.numbers import error_budget, num

    assert num(1e-13) == "0.0000000000001"
    assert num(error_budget(0.9999999999999)) == "0.0000000000001"
    assert num(0.1 + 0.2) == "0.3" and num(10**20) == "100000000000000000000"
    out = generate(tmp_path, MODELS, {"slos": [slo(objectives=[{"target": 0.9999999999999}])]},
                   {"platform": {"queue_wait": {"seconds": 1e-13}}})
    check_rules(out)
    rules = (out / SLO_FILE).read_text()
    assert "/ 0.0000000000001\n" in rules and "/ 0\n" not in rules
    assert "mean5m > 0.0000000000001\n" in (out / PLATFORM_FILE).read_text()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetwatch.cli", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("text", ["99.9%", "99.99%", "99.999%", "0.07%", "99.95%", " 99.9 %"])
def test_percent_objectives_are_the_ratio_written(tmp_path, text):
    """``"99.9%"`` was ``float("99.9") / 100`` = 0.9990000000000001, which went as it is into
    the dashboards' thresholds (and the engine)."""
    from decimal import Decimal

    from fleetwatch.dashboards import generate as dashboards
    from fleetwatch.labels.registry import parse_registry
    from fleetwatch.slo.spec import parse_slo_file

    f = parse_slo_file({"slos": [slo(objectives=[{"target": text}])]})
    expected = float(Decimal(text.replace("%", "").strip()) / 100)
    assert f.slos[0].objective == expected and len(repr(expected)) <= 9
    files = dashboards(parse_registry({"models": MODELS}), f)
    assert repr(expected) in files["dashboards/slos.json"]
    for name, body in files.items():
        assert "00000000" not in body and "99999999" not in body, name


def _spec_file(tmp_path, **fields: object) -> str:
    import yaml

    path = tmp_path / "slos.yaml"
    path.write_text(yaml.safe_dump({"slos": [slo(**fields)]}, allow_unicode=True))
    return str(path)


BAD_SPECS = {
    "nan period": {"timeWindow": [{"duration": float("nan")}]},
    "infinite period": {"timeWindow": [{"duration": float("inf")}]},
    "period beyond Prometheus ranges": {"timeWindow": [{"duration": "106752d"}]},
    "sub-millisecond period": {"timeWindow": [{"duration": "0.5ms"}]},
    "sub-millisecond number of seconds": {"timeWindow": [{"duration": 0.0001}]},
    "infinite envelope": {"concurrency": {"envelope": float("inf")}},
    "infinite band": {"concurrency": {"envelope": 1, "bands": [1, float("inf")]}},
    "bands sharing a label": {"concurrency": {"envelope": 1,
                                              "bands": [1, 1234567, 1234568]}},
    "infinite threshold": {"sli": {"latency": {"metric": "ttft",
                                               "threshold_seconds": float("inf")}}},
    "lone surrogate": {"description": "x\ud800y"},
    "not a percentage": {"objectives": [{"target": "nine%"}]},
    "percentage beyond any float": {"objectives": [{"target": "1e99999999999%"}]},
    "envelope too large for the default bands": {"concurrency": {"envelope": 1e300}},
}


def test_two_tiers_with_the_same_windows_are_an_input_error(tmp_path):
    """Two window pairs 6h/1h (budgets 2 % and 10 %) made two alerts per kind with the same
    ``burn_tier`` (one identity, no inhibition order between them); ``rules --tests`` said
    ``expected one FleetwatchSLORegression rule … got 2``."""
    path = tmp_path / "slos.yaml"
    path.write_text(yaml.safe_dump({
        "windows": [{"long": "6h", "short": "1h", "budget_consumed": 0.02},
                    {"long": "1d", "short": "2m", "budget_consumed": 0.02},
                    {"long": "6h", "short": "1h", "budget_consumed": 0.1}],
        "slos": [slo()]}))
    res = cli("slo", "validate", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"fleetwatch: error: {path}: ")
    assert "windows[2] has the same long and short windows as windows[0] (6h/1h)" in res.stderr


@pytest.mark.parametrize("case", BAD_SPECS)
def test_impossible_numbers_are_bad_input_not_tracebacks(tmp_path, case):
    """Each was accepted by ``slo validate`` (exit 0) and then gave a traceback (NaN or
    infinite periods, envelopes and bands — an infinite envelope made 1025 bands, a 1e300
    one 998 bands whose labels collide — or
    UnicodeEncodeError when writing dashboards), rules promtool rejects (``duration out of
    range``), or two bands exported as one series. Now: exit 2, the file and the field."""
    path = _spec_file(tmp_path, **BAD_SPECS[case])
    reg = tmp_path / "models.yaml"
    reg.write_text("models: [{name: m, team: t, owner: o, oncall: c}]\n")
    for args in (["slo", "validate", path],
                 ["rules", "--registry", str(reg), "--slos", path, "--out", str(tmp_path / "r")],
                 ["dashboards", "--registry", str(reg), "--slos", path, "--out",
                  str(tmp_path / "d")]):
        res = cli(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        assert res.stderr.startswith(f"fleetwatch: error: {path}: slos[0]"), res.stderr


def test_millisecond_and_fractional_durations_are_exact(tmp_path):
    """``1.1h`` is 3960 s exactly (it was 3960.0000000000005), and a 1500ms period or a
    90500ms window — valid Prometheus ranges — once raised ``ValueError: window 1.5 s is not a
    positive whole number of seconds`` from ``fleetwatch rules``."""
    from fleetwatch.alerts.generate import SLO_FILE
    from fleetwatch.slo.spec import parse_duration

    assert parse_duration("1.1h") == 3960 and parse_duration("0.3s") == 0.3
    spec = {"windows": [{"long": "1h", "short": "90500ms", "budget_consumed": 0.02}],
            "slos": [slo(timeWindow=[{"duration": "1500ms"}]),
                     slo(name="b", timeWindow=[{"duration": "1.1h"}])]}
    out = generate(tmp_path, MODELS, spec)
    check_rules(out)
    text = (out / SLO_FILE).read_text()
    for name in ("ratio_rate1500ms", "ratio_rate90500ms", "ratio_rate66m"):
        assert name in text


def test_burn_thresholds_in_annotations_are_plain_numbers(tmp_path):
    """Annotations wrote thresholds with ``%.4g``: 525600 as "5.256e+05x", 2102.4 as "2102x"."""
    from fleetwatch.alerts.generate import SLO_FILE

    spec = {"windows": [{"long": "5m", "short": "1m", "budget_consumed": 0.02},
                        {"long": "1m", "short": "30s", "budget_consumed": 1}],
            "slos": [slo(timeWindow=[{"duration": "365d"}])]}
    text = (generate(tmp_path, MODELS, spec) / SLO_FILE).read_text()
    assert "A 525600x burn" in text and "A 2102.4x burn" in text
    assert "e+05" not in text and "2102x" not in text


def test_behaviour_tests_carry_no_float_noise(tmp_path):
    """The behaviour tests' input series were written with ``repr``: a queue-wait
    threshold of 0.1 s gave ``18.000000000000004`` (120 × 0.15). They still pass."""
    import re

    from fleetwatch.alerts.generate import TESTS_FILE

    noise = re.compile(r"[0-9]\.[0-9]*(0000000|9999999)[0-9]")
    for qs, kv in ((0.1, 0.85), (0.3, 0.7), (0.7, 0.33)):
        out = generate(tmp_path / f"{qs}", MODELS,
                       {"slos": [slo(objectives=[{"target": "99.9%"}])]},
                       {"platform": {"queue_wait": {"seconds": qs},
                                     "kv_cache": {"usage_ratio": kv},
                                     "gpu_memory": {"usage_ratio": kv}}}, tests=True)
        for f in out.iterdir():
            assert not noise.search(f.read_text()), (qs, f.name, noise.search(f.read_text()))
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_an_envelope_below_the_lowest_band_gives_runnable_behaviour_tests(tmp_path):
    """``envelope: 0.5`` (a fast classic model under Little's law) with bands [1, 2]: no band
    is inside the envelope, so every burn is overload. ``rules --tests`` once died with
    ``IndexError``; now it tests the overload alerts and promtool runs them."""
    from fleetwatch.alerts.generate import TESTS_FILE

    spec = {"slos": [slo(concurrency={"envelope": 0.5, "bands": [1, 2]})]}
    out = generate(tmp_path, MODELS, spec, tests=True)
    check_rules(out)
    doc = yaml.safe_load((out / TESTS_FILE).read_text())
    assert any(r["alertname"] == "FleetwatchSLOOverload" and r["exp_alerts"]
               for t in doc["tests"] for r in t.get("alert_rule_test", []))
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_five_nines_with_a_window_as_long_as_the_period_is_tested(tmp_path):
    """99.999 % over 2h with one 2h/2m tier (threshold 1x): with 100 000 events per step the
    threshold was a single bad event, so ``rules --tests`` refused (``multiwindow scenario
    sustained … is too close to the threshold``, exit 2) and threshold tests of small
    budgets were silently left out. Events per step now scale with the budget."""
    from fleetwatch.alerts.generate import TESTS_FILE

    spec = {"windows": [{"long": "2h", "short": "2m", "budget_consumed": 1}],
            "slos": [slo(objectives=[{"target": "99.999%"}], timeWindow=[{"duration": "2h"}],
                         concurrency={"envelope": 16, "bands": [16]})]}
    out = generate(tmp_path, MODELS, spec, tests=True)
    text = (out / TESTS_FILE).read_text()
    assert "burn just above and below 1x" in text and "both windows must burn" in text
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_a_sub_minute_period_gives_runnable_behaviour_tests(tmp_path):
    """A 1500ms period (a valid range): the recording-rule test expected a burn rate over
    [1500ms] from one-minute samples, which Prometheus cannot compute (``got: nil``)."""
    from fleetwatch.alerts.generate import TESTS_FILE

    spec = {"slos": [slo(timeWindow=[{"duration": "1500ms"}])]}
    out = generate(tmp_path, MODELS, spec, tests=True)
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_multiwindow_scenarios_step_off_annotation_rounding_edges(tmp_path):
    """A 90s period with 2h/5m, 3d/5m and 3d/1h tiers: the sustained burn (1.1x a 0.00125
    threshold = 0.001375) sits on a ``%.3g`` rounding edge of the annotations, and
    ``rules --tests`` gave up (``too close to the threshold``, exit 2) instead of trying
    another burn."""
    from fleetwatch.alerts.generate import TESTS_FILE

    spec = {"windows": [{"long": "2h", "short": "5m", "budget_consumed": 0.1},
                        {"long": "3d", "short": "5m", "budget_consumed": 0.1},
                        {"long": "3d", "short": "1h", "budget_consumed": 1,
                         "severity": "ticket"}],
            "slos": [slo(timeWindow=[{"duration": "90s"}])]}
    out = generate(tmp_path, MODELS, spec, tests=True)
    assert "both windows must burn" in (out / TESTS_FILE).read_text()
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # a 3d period with 3d/1d (0.001x), 1d/2h (1.5x) and 3d/2h tiers: every burn of the
    # first multipliers tried landed on an edge (1.875, 1.575) of some tier
    spec = {"windows": [{"long": "3d", "short": "1d", "budget_consumed": 0.001},
                        {"long": "1d", "short": "2h", "budget_consumed": 0.5,
                         "severity": "ticket"},
                        {"long": "3d", "short": "2h", "budget_consumed": 0.02,
                         "severity": "ticket"}],
            "slos": [slo(timeWindow=[{"duration": "3d"}])]}
    out = generate(tmp_path / "second", MODELS, spec, tests=True)
    assert "both windows must burn" in (out / TESTS_FILE).read_text()


def test_thirteen_nines_give_runnable_behaviour_tests(tmp_path):
    """An objective of 0.9999999999999 (budget 1e-13): 2 % bad events burn at 2e11, and the
    recording-rule test compared ``round(1000 × burn)`` exactly — doubles have no
    thousandths there (``got 1.99999999999999E+14``). Large values are now compared
    relatively."""
    from fleetwatch.alerts.generate import TESTS_FILE

    spec = {"slos": [slo(objectives=[{"target": 0.9999999999999}])]}
    out = generate(tmp_path, MODELS, spec, tests=True)
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_a_threshold_off_the_recommended_buckets_gets_a_note_and_still_validates(tmp_path):
    """A 0.123 s TTFT threshold is no bucket boundary of vLLM's TTFT histogram (0.1 and
    0.25 are), so the SLO would read ``misconfigured`` at runtime: validation says so in a
    note and still passes; 0.1 is a boundary and gets no note."""
    path = tmp_path / "slos.yaml"
    lat = {"sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.123}}}
    path.write_text(yaml.safe_dump({"slos": [
        slo(name="off", **lat),
        slo(name="on", sli={"latency": {"metric": "ttft", "threshold_seconds": 0.1}})]}))
    res = cli("slo", "validate", str(path))
    assert res.returncode == 0, res.stderr
    notes = res.stderr.strip().splitlines()
    assert notes == [f"{path}: off: note: threshold 0.123 s is not a recommended bucket "
                     "boundary of modelserver_time_to_first_token_seconds (nearest: 0.1, "
                     "0.25); it counts good events only where the source exports that "
                     "boundary, else the SLO reads misconfigured"]
    assert f"{path}: ok (2 SLOs)" in res.stdout
