"""The ``slo_sim`` demo model on a real Triton: latency grows with concurrency, and its
``vllm:e2e_request_latency_seconds`` histogram (read from Triton's own /metrics) says so.

Run with ``-s`` to see the latency-vs-concurrency table (client and histogram view) that SLO
thresholds can be picked from.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load import MAX_STEPS, StepResult, slo_sim_inputs, step_load
from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY, TritonServer
from tests.support.disturbance import shortfalls, slo_sim_step, until_undisturbed

pytestmark = pytest.mark.latency

E2E = "vllm:e2e_request_latency_seconds"
TTFT = "vllm:time_to_first_token_seconds"
STEPS = (1, 2, 4, 8)
SECONDS_PER_STEP = 2.0
# Buckets whose per-step "good" fraction is printed (candidate SLO thresholds).
TABLE_BUCKETS = ("0.02", "0.04", "0.08", "0.16")
# The latency SLO threshold of the scenarios on slo_sim (seconds): a run is judged
# undisturbed by the versions faster than it (tests/support/disturbance.py).
GATE_THRESHOLD = 0.04


@pytest.fixture(scope="module")
def slo_server() -> Iterator[TritonServer]:
    """A tritonserver with only ``slo_sim`` (versions 1 and 2) loaded."""
    with TritonServer(models=["slo_sim"]) as server:
        yield server


@dataclass(frozen=True)
class Histogram:
    """One cumulative histogram series: count, sum and cumulative bucket counts by ``le``."""

    count: float = 0.0
    total: float = 0.0
    buckets: tuple[tuple[str, float], ...] = ()

    def bucket(self, le: str) -> float:
        return dict(self.buckets).get(le, 0.0)


class Scrape:
    """One parse of Triton's /metrics (prometheus_client's parser)."""

    def __init__(self, text: str) -> None:
        self.families = {family.name: family for family in text_string_to_metric_families(text)}

    def histogram(self, name: str, version: str) -> Histogram:
        family = self.families.get(name)
        if family is None:
            return Histogram()
        assert family.type == "histogram", family.type
        count = total = 0.0
        buckets: list[tuple[str, float]] = []
        for sample in family.samples:
            if sample.labels.get("model") != "slo_sim" or sample.labels.get("version") != version:
                continue
            if sample.name == f"{name}_count":
                count = sample.value
            elif sample.name == f"{name}_sum":
                total = sample.value
            elif sample.name == f"{name}_bucket":
                buckets.append((sample.labels["le"], sample.value))
        return Histogram(count, total, tuple(buckets))

    def success(self, version: str) -> float:
        """Triton's own ``nv_inference_request_success`` for ``slo_sim`` ``version``."""
        family = self.families.get("nv_inference_request_success")
        for sample in family.samples if family is not None else []:
            if sample.labels == {"model": "slo_sim", "version": version}:
                return sample.value
        return 0.0


def scrape_until(
    server: TritonServer, done: Callable[[Scrape], bool], timeout_s: float = 5.0
) -> Scrape:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            current = Scrape(server.metrics_text())
        except OSError as error:  # say why: a dead server or a metrics port someone else took
            raise AssertionError(
                f"{server.metrics_url} did not answer ({error}); running={server.running}; "
                f"tritonserver log:\n{server.log_tail()}"
            ) from error
        if done(current) or time.monotonic() >= deadline:
            return current
        time.sleep(0.05)


def settled(version: str) -> Callable[[Scrape], bool]:
    """The histogram has observed every request Triton counts as a success."""
    return lambda s: s.histogram(E2E, version).count == s.success(version)


@dataclass(frozen=True)
class Step:
    """A `StepResult` with the histogram's increments over the same step."""

    client: StepResult
    count: float
    total: float
    le: dict[str, float]

    @property
    def hist_mean_s(self) -> float:
        return self.total / self.count if self.count else math.nan


def run_steps(server: TritonServer, version: str) -> list[Step]:
    """`step_load` over `STEPS` on ``version``, scraping the histogram after each step."""
    scrapes = [scrape_until(server, settled(version))]

    def on_step(concurrency: int, t_start: float, t_end: float) -> None:
        assert t_end > t_start
        scrapes.append(scrape_until(server, settled(version)))

    results = step_load(
        server.http_address,
        "slo_sim",
        steps=STEPS,
        seconds_per_step=SECONDS_PER_STEP,
        model_version=version,
        on_step=on_step,
    )
    assert [r.concurrency for r in results] == list(STEPS)
    assert len(scrapes) == len(STEPS) + 1
    steps = []
    for result, before, after in zip(results, scrapes[:-1], scrapes[1:], strict=True):
        b, a = before.histogram(E2E, version), after.histogram(E2E, version)
        le = {x: a.bucket(x) - b.bucket(x) for x in TABLE_BUCKETS}
        steps.append(Step(result, a.count - b.count, a.total - b.total, le))
    return steps


def print_table(version: str, steps: list[Step]) -> None:
    header = (
        f"slo_sim v{version}  c  reqs  rps   client mean/p50/p99 ms   hist mean ms   "
        + "  ".join(f"<={x}s" for x in TABLE_BUCKETS)
    )
    print("\n" + header)
    for step in steps:
        r = step.client
        fractions = "  ".join(f"{step.le[x] / step.count:6.1%}" for x in TABLE_BUCKETS)
        print(
            f"{'':11}{r.concurrency:2d}  {r.requests:4d}  {r.throughput_rps:4.0f}   "
            f"{r.mean_s * 1e3:6.1f} {r.p50_s * 1e3:6.1f} {r.p99_s * 1e3:6.1f}      "
            f"{step.hist_mean_s * 1e3:8.1f}     {fractions}"
        )


@pytest.mark.triton
def test_latency_grows_with_concurrency_and_v2_regresses(slo_server: TritonServer) -> None:
    started = time.monotonic()
    v1, v2 = until_undisturbed(
        lambda: (run_steps(slo_server, "1"), run_steps(slo_server, "2")),
        lambda run: shortfalls(slo_sim_step(version, step.client, GATE_THRESHOLD)
                               for version, steps in zip("12", run, strict=True)
                               for step in steps),
        "slo_sim's steps")
    print_table("1", v1)
    print_table("2", v2)
    print(f"(load phase {time.monotonic() - started:.1f} s)")

    for step in [*v1, *v2]:
        result = step.client
        assert result.failed == 0, result.errors
        assert result.requests > 0
        # Every successful request is observed exactly once, in its own step.
        assert step.count == result.requests, (result.concurrency, step.count, result.requests)
        # The histogram includes the queueing: it tracks the client's view (it stops a little
        # earlier, before the response travels back), not just the ~service time of execute().
        assert 0.6 * result.mean_s <= step.hist_mean_s <= result.mean_s + 0.002, step

    means = [step.hist_mean_s for step in v1]
    assert means == sorted(means), means
    assert means[-1] > 3 * means[0], means  # c=8 vs c=1: roughly linear growth
    assert v2[0].hist_mean_s > 2 * v1[0].hist_mean_s, (v2[0].hist_mean_s, v1[0].hist_mean_s)

    # TTFT gets the same observations (the one response of a non-decoupled model is the first).
    final = Scrape(slo_server.metrics_text())
    for version in ("1", "2"):
        e2e, ttft = final.histogram(E2E, version), final.histogram(TTFT, version)
        assert ttft.count == e2e.count
        assert ttft.total == pytest.approx(e2e.total)
        assert e2e.bucket("+Inf") == e2e.count
    assert [le for le, _ in final.histogram(E2E, "1").buckets] == [
        "0.005", "0.01", "0.02", "0.04", "0.08", "0.16", "0.32", "0.64", "1.28", "2.56", "+Inf",
    ]  # fmt: skip


@pytest.mark.triton
def test_without_t0_the_model_measures_from_execute_start(slo_server: TritonServer) -> None:
    before = scrape_until(slo_server, settled("1")).histogram(E2E, "1")
    result = send_requests(
        slo_server.http_address,
        "slo_sim",
        inputs=lambda i: {"X": np.ones(3, dtype=np.float32)},
        requests=3,
        model_version="1",
    )
    assert result.succeeded == 3, result.errors
    after = scrape_until(slo_server, settled("1")).histogram(E2E, "1")
    assert after.count - before.count == 3
    # About the 8 ms service time each; queueing and transport are not seen without T0.
    assert 3 * 0.008 <= after.total - before.total < 3 * 0.05


def test_versions_differ_only_in_service_time() -> None:
    """Version 2 is version 1 with a longer service time (the files are kept in step)."""
    model = DEFAULT_MODEL_REPOSITORY / "slo_sim"
    v1, v2 = ((model / v / "model.py").read_text().splitlines() for v in ("1", "2"))
    changed = [(a, b) for a, b in zip(v1, v2, strict=True) if a != b]
    assert [a.split()[0] for a, _ in changed] == ['"""Demo', "SERVICE_TIME_S"], changed
    assert [b.split()[:3] for _, b in changed][1] == ["SERVICE_TIME_S", "=", "0.050"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"address": "10.0.0.1:8000"}, "loopback"),
        ({"steps": ()}, "levels"),
        ({"steps": (1,) * (MAX_STEPS + 1)}, "levels"),
        ({"steps": (1, 2.5)}, "integers"),
        ({"steps": (0,)}, "concurrency"),
        ({"seconds_per_step": 0}, "seconds_per_step"),
        ({"steps": (1, 2), "seconds_per_step": 24 * 3600.0}, "len\\(steps\\)"),
        ({"model": "nope"}, "no default inputs"),
    ],
)
def test_step_load_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"address": "127.0.0.1:1", "model": "slo_sim", **kwargs}
    calls: list[int] = []
    with pytest.raises(ValueError, match=message):
        step_load(on_step=lambda c, a, b: calls.append(c), **arguments)  # type: ignore[arg-type]
    assert calls == []


def test_slo_sim_inputs_stamp_the_send_time() -> None:
    before = time.time_ns()
    tensors = slo_sim_inputs(5)
    after = time.time_ns()
    assert tensors["X"].dtype == np.float32 and tensors["X"].shape == (4,)
    assert tensors["T0"].dtype == np.int64 and tensors["T0"].shape == (1,)
    assert before <= int(tensors["T0"][0]) <= after
