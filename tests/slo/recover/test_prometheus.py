"""The rebuild from Prometheus' answers: the buckets are the differences of the counters at
their edges, a restarted counter's later value is its increase, a sample that is not a
finite non-negative number is skipped, and an engine restored from the answers of its
own scrapes equals the engine (within one scrape interval's events per bucket)."""

from __future__ import annotations

import math

import pytest

from fleetwatch.slo.recover import prometheus as prom
from fleetwatch.slo.state import ModelKey
from tests.slo.recover.test_snapshot import _docs, _learned, _restored
from tests.slo.test_engine import Feed


def test_bucket_events_are_the_differences_of_the_edges():
    q = prom.window_queries([60.0], 6, 1000.0)[0]  # 10 s buckets; current 100: 95..100
    assert (q.first, q.start, q.end, q.step) == (95, 950.0, 1000.0, 10.0)
    edges = {95: 10.0, 96: 12.0, 98: 20.0, 99: 3.0, 100: 5.0}  # 97 missing; reset at 99
    assert prom.bucket_counts(edges, 9.0, q, 6) == [
        (95, 2.0),   # 10 → 12
        (97, 8.0),   # 96 carried to 97, then 20
        (98, 3.0),   # 20 → 3: restarted, the increase is 3
        (99, 2.0),   # 3 → 5
        (100, 4.0),  # 5 → 9 (now)
    ]


def test_a_series_that_began_inside_the_window_counts_from_zero():
    q = prom.window_queries([60.0], 6, 1000.0)[0]
    # nothing before edge 99 (4), edge 100 missing (carried), 6 now
    assert prom.bucket_counts({99: 4.0}, 6.0, q, 6) == [(98, 4.0), (100, 2.0)]


def _sample(metric: dict[str, str], value: object) -> dict:
    return {"metric": metric, "value": [1000.0, value]}


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "-1", "1e999", "many", None])
def test_a_value_that_is_not_a_finite_non_negative_number_is_skipped(bad):
    labels = {"slo": "ttft", "model": "llm", "backend": "vllm", "band": "all"}
    answers = prom.Answers(1000.0, instant={
        prom.EVENTS: [_sample(labels, bad), _sample({**labels, "band": "8"}, "10")],
        prom.GOOD: [_sample(labels, "5"), _sample({**labels, "band": "8"}, "9")],
        prom.CAPACITY: [_sample({k: v for k, v in labels.items() if k != "band"}, "4")]})
    rec = prom.rebuild(answers, [60.0], 6, 60.0)
    st = rec.states[("ttft", ModelKey("llm", "", "vllm"))]
    assert set(st.bands) == {"8"}
    assert (st.bands["8"].good, st.bands["8"].total, st.capacity) == (9.0, 10.0, 4.0)


def test_a_sample_without_the_labels_of_a_state_is_skipped():
    answers = prom.Answers(1000.0, instant={
        prom.EVENTS: [_sample({"slo": "ttft", "model": "llm", "band": "all"}, "3")],
        prom.CAPACITY: [_sample({"slo": "ttft", "model": "llm"}, "4")]},
        fleet=[_sample({"slo": "ttft", "model": "llm", "backend": "vllm"}, "0"),
               _sample({"slo": "ttft", "model": "x", "backend": "vllm"}, "Inf")])
    rec = prom.rebuild(answers, [60.0], 6, 60.0)
    assert rec.states == {} and rec.fleet == {}


class Scrapes:
    """What a Prometheus scraping the engine's exported series once a second (half a second
    after each update) would answer: a query at time ``p`` reads the last scrape at or
    before ``p`` (within the 5-minute lookback)."""

    def __init__(self) -> None:
        self.history: list[tuple[float, dict[tuple[str, tuple[tuple[str, str], ...]], float]]] = []

    def scrape(self, f: Feed) -> None:
        wanted = set(prom.INSTANT)
        self.history.append((f.t + 0.5, {
            (name, tuple(sorted(labels.items()))): value
            for name, labels, value in f.engine.iter_metrics()
            if name in wanted and math.isfinite(value)}))

    def at(self, p: float) -> dict:
        got: dict = {}
        for t, values in self.history:
            if p - 300 <= t <= p:
                got = values
        return got

    def answers(self, now: float, lengths: list[float], buckets: int) -> prom.Answers:
        out = prom.Answers(now)
        for metric in prom.INSTANT:
            out.instant[metric] = [{"metric": dict(lab), "value": [now, repr(v)]}
                                   for (m, lab), v in self.at(now).items() if m == metric]
        for q in prom.window_queries(lengths, buckets, now):
            for metric in (prom.EVENTS, prom.GOOD):
                series: dict = {}
                for j in range(buckets):
                    p = q.start + j * q.step
                    for (m, lab), v in self.at(p).items():
                        if m == metric:
                            series.setdefault(lab, []).append([p, repr(v)])
                out.ranges[(metric, q.length)] = [{"metric": dict(lab), "values": vs}
                                                  for lab, vs in series.items()]
        return out


def test_an_engine_restored_from_the_answers_of_its_scrapes_equals_the_engine():
    scrapes = Scrapes()
    a = _learned()
    scrapes.scrape(a)
    for _ in range(3):  # still: no more events, scraped
        a.step(6, 0, 0)
        scrapes.scrape(a)
    rec = prom.rebuild(scrapes.answers(a.t + 0.7, a.engine.window_lengths, 60),
                       a.engine.window_lengths, 60, a.engine.spec.capacity.window)
    b = _restored(rec, a)
    for f in (a, b):
        f.step(6, 0, 0)
        f.step(6, 0, 0)
    before, after = _docs(a), _docs(b)
    for x, y in zip(before, after, strict=True):
        assert y["events"] == x["events"]
        assert y["error_budget_remaining"] == pytest.approx(x["error_budget_remaining"])
        assert (y["capacity"], y["capacity_evidence"]) == (x["capacity"], x["capacity_evidence"])
        for w in ("1m", "1h"):  # 1 s buckets and more: each scrape's events in its bucket
            assert y["burn_rates"][w] == pytest.approx(x["burn_rates"][w], nan_ok=True), w
        for band, ev in x["band_latency"].items():
            assert y["band_latency"][band]["concurrency"] == pytest.approx(ev["concurrency"])
            assert y["band_latency"][band]["latency_seconds"] == \
                pytest.approx(ev["latency_seconds"])
    assert {s["recovered_from"] for s in b.engine.status()} == {"prometheus"}
