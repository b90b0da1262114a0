"""The state snapshot: a restored engine equals the one it was taken from; a corrupt,
foreign or other-version snapshot is refused whole."""

from __future__ import annotations

import json

import pytest

from fleetwatch.slo.recover.records import Recovered
from fleetwatch.slo.recover.snapshot import SnapshotError, decode, encode
from fleetwatch.slo.state import ModelKey
from tests.slo.test_engine import Feed

#: What differs by design between an engine and its restored copy.
_ORIGIN = ("recovered_from",)


def _learned() -> Feed:
    """An engine that learned: band 2 good, band 8 half bad (overload, capacity from the
    capacity model), then good load in band 8."""
    f = Feed()
    f.step(2, 0, 0)
    for _ in range(30):
        f.step(2, 20, 20)
    for _ in range(20):
        f.step(8, 10, 20)
    for _ in range(5):
        f.step(6, 20, 20)
    return f


def _docs(f: Feed) -> list[dict]:
    return [{k: v for k, v in s.items() if k not in _ORIGIN} for s in f.engine.status()]


def _restored(rec: Recovered, like: Feed) -> Feed:
    g = Feed()
    g.engine.restore(rec)
    g.t, g.good, g.total = like.t, like.good, like.total  # the server's counters go on
    return g


def test_a_restored_engine_equals_the_one_its_snapshot_was_taken_from():
    a = _learned()
    rec = decode(encode(a.engine.snapshot()))
    b = _restored(rec, a)
    # b primes its counters at the next second, makes (and restores) its states the second
    # after; a runs the same two seconds without events
    for f in (a, b):
        f.step(6, 0, 0)
        f.step(6, 0, 0)
    before, after = _docs(a), _docs(b)
    assert [s["capacity_evidence"] for s in before] != ["envelope"] * len(before)
    assert after == before
    assert {s["recovered_from"] for s in b.engine.status()} == {"snapshot"}
    assert {s["recovered_from"] for s in a.engine.status()} == {None}


def test_the_restored_counters_go_on_from_the_recovered_counts():
    a = _learned()
    b = _restored(decode(encode(a.engine.snapshot())), a)
    b.step(6, 0, 0)
    b.step(6, 20, 20)  # 20 more events, band 8 (running 6 → 6)
    events = {s["slo"]: s["events"]["all"] for s in b.engine.status()}
    assert events["ttft"] == a.state()["events"]["all"] + 20


def test_a_new_state_starts_from_the_fleet_capacity():
    f = Feed()
    f.engine.restore(Recovered("prometheus", f.t, 60,
                               fleet={("ttft", ModelKey("llm", "", "vllm")): 6.5}))
    f.step(1, 0, 0)
    f.step(1, 1, 1)
    st, other = f.state(), f.state("avail")
    assert (st["capacity"], st["capacity_evidence"], st["recovered_from"]) == \
        (6.5, "fleet", "fleet")
    assert (other["capacity"], other["recovered_from"]) == (4.0, None)  # no fleet value


def _doc(a: Feed) -> dict:
    doc: dict = json.loads(encode(a.engine.snapshot()))
    return doc


@pytest.mark.parametrize("body,reason", [
    (b"", "not JSON"),
    (b'{"format": "fleetwatch-slo-state", "version": 1, "saved"', "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b'{"format": "something-else", "version": 1}', "not a fleetwatch SLO state"),
    (b"[1, 2]", "not a fleetwatch SLO state"),
    (b'{"format": "fleetwatch-slo-state", "version": 2}', "version 2"),
])
def test_a_corrupt_foreign_or_other_version_snapshot_is_refused(body, reason):
    with pytest.raises(SnapshotError, match=reason):
        decode(body)


@pytest.mark.parametrize("path,value,field", [
    (("states", 0, "capacity"), -1.0, "capacity"),
    (("states", 0, "bands", "all", "total"), -5.0, "total"),
    (("states", 0, "bands", "all", "good"), "many", "good"),
    (("saved",), None, "saved"),
])
def test_a_value_out_of_its_domain_refuses_the_whole_snapshot(path, value, field):
    doc = _doc(_learned())
    at = doc
    for p in path[:-1]:
        at = at[p]
    at[path[-1]] = value
    with pytest.raises(SnapshotError, match=field):
        decode(json.dumps(doc).encode())


def test_a_non_finite_count_is_refused():
    body = encode(_learned().engine.snapshot()).replace(b'"total":', b'"total":1e999,"x":', 1)
    with pytest.raises(SnapshotError):
        decode(body)
