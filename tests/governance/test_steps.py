"""Rollout steps from each version's traffic, and the gate to the next step."""

from __future__ import annotations

import pytest

from fleetwatch.governance.steps import (
    CANARY,
    FULL,
    LOADED,
    OLD_REMOVED,
    SHADOW,
    StepError,
    VersionTraffic,
    gate,
    step,
)
from fleetwatch.rollout.compare import Comparison


def _vt(version: str, rate: float | None) -> VersionTraffic:
    return VersionTraffic(version, rate)


@pytest.mark.parametrize(("base", "cand", "shadow", "name", "share"), [
    (5.0, 0.0, False, LOADED, 0.0),
    (5.0, 5.0, True, SHADOW, None),
    (9.0, 1.0, False, CANARY, 0.1),
    (0.0, 4.0, False, FULL, 1.0),
    (None, 4.0, False, OLD_REMOVED, 1.0),
])
def test_step_from_traffic(base: float | None, cand: float, shadow: bool, name: str,
                           share: float | None) -> None:
    s = step(_vt("1", base), _vt("2", cand), shadow)
    assert (s.name, s.share) == (name, pytest.approx(share) if share else share)


def test_a_candidate_without_series_is_an_error() -> None:
    with pytest.raises(StepError, match="version '2' has no series"):
        step(_vt("1", 3.0), _vt("2", None), False)


def _cmp(verdict: str) -> Comparison:
    return Comparison("m", "1", "2", verdict, (("lat", "4"),))


def test_gate_into_canary_blocks_a_worse_band_and_names_it() -> None:
    g = gate(step(_vt("1", 5), _vt("2", 5), True), _cmp("worse"), True)
    assert (g.to, g.passes) == (CANARY, False)
    assert g.reasons == ("memory plan: fits", "comparison: worse (lat band 4)")


@pytest.mark.parametrize(("verdict", "fits", "passes"), [
    ("same", True, True), ("better", None, True), ("same", False, False),
    ("not enough data", True, False)])
def test_gate_needs_data_not_worse_and_a_fitting_plan(verdict: str, fits: bool | None,
                                                      passes: bool) -> None:
    assert gate(step(_vt("1", 9), _vt("2", 1), False), _cmp(verdict), fits).passes is passes


def test_gate_into_shadow_checks_only_the_plan() -> None:
    at = step(_vt("1", 5), _vt("2", 0), False)
    assert gate(at, None, False).passes is False
    assert gate(at, None, None).passes is True


def test_full_may_remove_the_old_version_and_the_last_step_has_no_gate() -> None:
    assert gate(step(_vt("1", 0), _vt("2", 3), False), None, None).to == OLD_REMOVED
    last = gate(step(_vt("1", None), _vt("2", 3), False), None, None)
    assert (last.to, last.passes) == (None, True)
