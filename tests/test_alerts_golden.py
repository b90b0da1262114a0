"""Golden files of the rules generator (regenerate: .venv/bin/python -m fleetwatch.alerts.golden,
then review the diff): rules, PrometheusRule, behaviour tests and Alertmanager config for
tests/golden/alerts/input/ and examples/receivers.yaml."""

from __future__ import annotations

import pytest
from tests.helpers import GOLDEN, ROOT

from fleetwatch.alerts.golden import golden_outputs

ALERTS = GOLDEN / "alerts"
OUTPUTS = golden_outputs(ROOT)
REGEN = ".venv/bin/python -m fleetwatch.alerts.golden"


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_matches_golden(name):
    path = ALERTS / name
    assert path.exists(), f"missing golden alerts/{name}: run {REGEN}"
    assert OUTPUTS[name] == path.read_text(encoding="utf-8"), (
        f"alerts/{name} changed: review, then run {REGEN}")


def test_no_stale_golden_files():
    on_disk = {p.name for p in ALERTS.iterdir() if p.is_file()}
    assert on_disk == set(OUTPUTS), f"stale or missing files: run {REGEN}"
