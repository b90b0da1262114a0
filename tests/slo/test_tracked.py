"""The tracked (SLO, model) states: made within an SLO's model limit, their counts read
from the ledger, and which models are gone (no metrics nor trace event since the
horizon)."""

from __future__ import annotations

from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.account.limits import ModelCap, ModelLimit
from fleetwatch.slo.account.tracked import TrackedStates
from fleetwatch.slo.spec import parse_slo_file
from fleetwatch.slo.state import ALL, ModelKey
from tests.slo.test_engine import SLOS


def _tracked(max_models: int) -> tuple[TrackedStates, Ledger]:
    slos = parse_slo_file({**SLOS, "limits": {"max_models_per_slo": max_models}})
    ledger = Ledger(slos)
    return TrackedStates(ledger, ModelLimit(max_models), ModelCap(10_000)), ledger


def _mk(name: str) -> ModelKey:
    return ModelKey(name, "1", "vllm")


def test_states_are_made_within_the_limit_and_count_from_the_ledger():
    tracked, ledger = _tracked(2)
    slo = ledger.spec.slos[0]
    a, b = tracked.make(slo, _mk("a"), 0.0), tracked.make(slo, _mk("b"), 0.0)
    assert a is not None and b is not None
    assert tracked.make(slo, _mk("c"), 0.0) is None  # past max_models_per_slo
    assert tracked.limit.refused[slo.name] == 1
    assert a.capacity == slo.concurrency.envelope
    row = ledger.row(a, ALL)
    ledger.add(1.0, [row], [3.0], [4.0])
    assert (a.events[ALL], a.good[ALL]) == (4.0, 3.0)  # the ledger's cumulative counts
    assert set(tracked.states) == {(slo.name, _mk("a")), (slo.name, _mk("b"))}


def test_a_model_is_gone_when_neither_metrics_nor_trace_events_are_recent():
    tracked, _ = _tracked(10)
    tracked.seen.update({_mk("old"): 10.0, _mk("traced"): 10.0, _mk("new"): 100.0})
    traced = {_mk("traced"): 95.0, _mk("trace-only-old"): 5.0, _mk("trace-only"): 99.0}
    assert tracked.gone(100.0, 50.0, traced) == [_mk("old"), _mk("trace-only-old")]
    assert tracked.gone(100.0, 50.0, {}) == [_mk("old"), _mk("traced")]


def test_past_the_cap_the_models_seen_least_recently_are_gone_too():
    tracked, _ = _tracked(10)
    tracked.cap.limit = 2
    tracked.seen.update({_mk("a"): 60.0, _mk("b"): 70.0, _mk("c"): 80.0, _mk("d"): 100.0})
    # none is past the horizon; four held, two allowed: the two seen least recently go
    assert tracked.gone(100.0, 50.0, {}) == [_mk("a"), _mk("b")]
    assert tracked.cap.evicted == 2


def test_dropping_gone_models_frees_their_places_under_the_limit():
    tracked, ledger = _tracked(2)
    slo = ledger.spec.slos[0]
    for name in ("a", "b"):
        tracked.make(slo, _mk(name), 0.0)
        tracked.seen[_mk(name)] = 0.0
        tracked.in_system[_mk(name)] = 3.0
    dropped = tracked.drop({_mk("a")})
    assert [st.model for st in dropped] == [_mk("a")]
    assert _mk("a") not in tracked.seen and _mk("a") not in tracked.in_system
    assert _mk("b") in tracked.seen
    assert tracked.make(slo, _mk("c"), 1.0) is not None  # a's place is free again
