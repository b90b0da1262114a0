"""The load a request saw (:class:`fleetwatch.traces.concurrency.LoadEstimator`): the
prefix-sum form equals the definition — the time average of the model's requests in the
system over the request's lifetime — read interval by interval (the oracle below)."""

from __future__ import annotations

import random

import pytest

from fleetwatch.traces.concurrency import LoadEstimator
from fleetwatch.traces.facts import RequestFacts

T0 = 1_800_000_000.0  # Unix seconds: sums of such times must keep their precision


def _facts(i: int, start: float, end: float, model: str = "m") -> RequestFacts:
    return RequestFacts("vllm", model, "", f"{i:032x}", start, end, end - start,
                        occupancy=(start, end))


def _oracle(f: RequestFacts, others: list[RequestFacts]) -> float:
    s, e = f.start_unix_s, f.end_unix_s
    occ = [o.occupancy for o in others if o.model == f.model]
    if e > s:
        return sum(max(0.0, min(b, e) - max(a, s)) for a, b in occ) / (e - s)
    return float(sum(1 for a, b in occ if a <= s <= b))


@pytest.mark.parametrize("seed", range(5))
def test_every_request_sees_what_the_definition_gives(seed):
    rng = random.Random(seed)
    facts = []
    for i in range(400):
        start = T0 + rng.uniform(0, 60)
        length = rng.choice([0.0, rng.uniform(0.001, 0.05), rng.uniform(0.5, 20)])
        facts.append(_facts(i, start, start + length, model=rng.choice("ab")))
    est = LoadEstimator()
    settled = []
    for i in range(0, len(facts), 37):  # bodies of several requests, settled later
        settled += est.add(facts[i:i + 37], 0.0)
    settled += est.add([], 100.0)
    assert len(settled) == len(facts)
    for f in settled:
        assert f.concurrency == pytest.approx(_oracle(f, facts), rel=1e-9, abs=1e-9), f


def test_a_flood_of_one_models_overlapping_requests_settles_in_full():
    # 20,000 requests of one model, all in flight together: each saw nearly 20,000
    # (the per-request cost is logarithmic: ./dev bench's trace receiver figures)
    facts = [_facts(i, T0 + i * 1e-5, T0 + 10 + i * 1e-5) for i in range(20_000)]
    est = LoadEstimator()
    out = []
    for i in range(0, len(facts), 500):
        out += est.add(facts[i:i + 500], 0.0)
    out += est.add([], 100.0)
    assert len(out) == 20_000
    for f in out[::997]:
        assert f.concurrency == pytest.approx(_oracle(f, facts), rel=1e-9)
    assert min(f.concurrency for f in out) > 19_000
