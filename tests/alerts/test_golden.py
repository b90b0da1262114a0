"""Golden files of the rules generator (regenerate: .venv/bin/python
tools/regen_alert_goldens.py, then review the diff): rules, PrometheusRule, behaviour
tests and Alertmanager config for tests/golden/alerts/input/ and examples/receivers.yaml.

The outputs are computed in a fixture, not at import: a generator crash is a test failure,
not a collection error."""

from __future__ import annotations

import pytest
from tools.regen_alert_goldens import golden_outputs

from tests.support.helpers import GOLDEN

ALERTS = GOLDEN / "alerts"
REGEN = ".venv/bin/python tools/regen_alert_goldens.py"
#: The files the generator writes for the golden inputs (pinned here, so the test ids do
#: not depend on running the generator at collection time).
FILES = ["alertmanager.yml", "fleetwatch-platform.rules.yml", "fleetwatch-recording.rules.yml",
         "fleetwatch-slo.rules.yml", "fleetwatch.prometheusrule.yaml",
         "fleetwatch.rules.test.yml"]


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    return golden_outputs()


def test_the_generator_writes_the_pinned_files(outputs):
    assert sorted(outputs) == FILES, f"file set changed: update FILES, then run {REGEN}"


@pytest.mark.parametrize("name", FILES)
def test_matches_golden(outputs, name):
    path = ALERTS / name
    assert name in outputs, f"the generator no longer writes {name}"
    assert path.exists(), f"missing golden alerts/{name}: run {REGEN}"
    assert outputs[name] == path.read_text(encoding="utf-8"), (
        f"alerts/{name} changed: review, then run {REGEN}")


def test_no_stale_golden_files(outputs):
    on_disk = {p.name for p in ALERTS.iterdir() if p.is_file()}
    assert on_disk == set(outputs), f"stale or missing files: run {REGEN}"
