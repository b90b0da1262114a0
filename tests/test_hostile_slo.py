"""SLO files at the edges — objectives such as "99.99%", tiny thresholds, year-long periods,
windows as long as the period, one-band envelopes — through ``fleetwatch rules`` (promtool
checks and runs the behaviour tests), the dashboards and ``fleetwatch slo validate``:
numbers come out exactly as written, and what cannot be expressed is a clean exit 2."""

from __future__ import annotations

from tests.test_hostile_rules import check_rules, generate, run, tool

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
