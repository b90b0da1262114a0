"""The real Triton harness: load goes in, Triton's own /metrics counts it.

Every count is checked as a before/after difference because the server (the module-scoped
``triton_server`` fixture) is shared by the tests of this module.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.clients.triton.results import LoadResult
from fleetwatch.clients.triton.stream import stream_requests
from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load import (
    faulty_inputs,
    faulty_is_negative,
    ranker_inputs,
    run_demo_load,
    streamer_inputs,
)
from fleetwatch.demo.triton import TritonServer, TritonStartError

pytestmark = pytest.mark.triton
ROOT = Path(__file__).resolve().parents[2]

Labels = frozenset[tuple[str, str]]


class Scrape:
    """One parse of Triton's /metrics.

    prometheus_client's parser drops ``_total`` from counter family names and then writes every
    counter sample as ``<family>_total``, whether or not the exposition had the suffix
    (``nv_inference_request_success`` has none, ``vllm:prompt_tokens_total`` has it). So counters
    are looked up here by family name without ``_total``; other samples by their sample name.
    """

    def __init__(self, text: str) -> None:
        self.types: dict[str, str] = {}
        self.values: dict[tuple[str, Labels], float] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for sample in family.samples:
                name = family.name if family.type == "counter" else sample.name
                self.values[(name, frozenset(sample.labels.items()))] = sample.value

    def get(self, name: str, **labels: str) -> float:
        """The sample's value; 0.0 when the series is absent."""
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str, **labels: str) -> bool:
        return (name, frozenset(labels.items())) in self.values


def scrape(server: TritonServer) -> Scrape:
    return Scrape(server.metrics_text())


def scrape_until(
    server: TritonServer, done: Callable[[Scrape], bool], timeout_s: float = 5.0
) -> Scrape:
    """Scrape until ``done`` holds (Triton updates counters as requests complete)."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = scrape(server)
        if done(current) or time.monotonic() >= deadline:
            return current
        time.sleep(0.1)


def assert_clean(result: LoadResult) -> None:
    assert result.failed == 0, result.errors
    assert result.succeeded == result.sent


def test_ranker_versions_over_http_and_grpc(triton_server: TritonServer) -> None:
    before = scrape(triton_server)
    v1 = send_requests(
        triton_server.http_address, "ranker", inputs=ranker_inputs, model_version="1",
        requests=40, concurrency=4
    )
    v2 = send_requests(
        triton_server.grpc_address,
        "ranker",
        protocol="grpc",
        inputs=ranker_inputs,
        model_version="2",
        requests=24,
        concurrency=3,
    )
    assert_clean(v1)
    assert_clean(v2)
    assert (v1.sent, v2.sent) == (40, 24)
    assert len(v1.latencies_s) == 40 and min(v1.latencies_s) > 0

    def delta(now: Scrape, name: str, version: str) -> float:
        return now.get(name, model="ranker", version=version) - before.get(
            name, model="ranker", version=version
        )

    after = scrape_until(
        triton_server,
        lambda s: (
            delta(s, "nv_inference_request_success", "2") >= 24
            and delta(s, "nv_inference_request_success", "1") >= 40
        ),
    )
    # Both versions are served and counted separately.
    assert after.has("nv_inference_request_success", model="ranker", version="1")
    assert after.has("nv_inference_request_success", model="ranker", version="2")
    assert delta(after, "nv_inference_request_success", "1") == v1.succeeded == 40
    assert delta(after, "nv_inference_request_success", "2") == v2.succeeded == 24
    assert delta(after, "nv_inference_count", "1") == 40
    for version, sleep_s in (("1", 0.003), ("2", 0.005)):
        assert delta(after, "nv_inference_request_failure", version) == 0
        executions = delta(after, "nv_inference_exec_count", version)
        assert 0 < executions <= delta(after, "nv_inference_count", version)
        # Each execute() sleeps its version's delay: Triton's compute time covers it.
        infer_us = delta(after, "nv_inference_compute_infer_duration_us", version)
        assert infer_us / executions >= sleep_s * 1e6
    # summary_latencies=true: the summaries count the same requests.
    assert delta(after, "nv_inference_request_summary_us_count", "1") == 40


def test_faulty_exceptions_count_as_backend_failures(triton_server: TritonServer) -> None:
    before = scrape(triton_server)
    http = send_requests(
        triton_server.http_address,
        "faulty",
        inputs=faulty_inputs(0.25),
        requests=20,
        concurrency=2,
    )
    grpc = send_requests(
        triton_server.grpc_address,
        "faulty",
        protocol="grpc",
        inputs=faulty_inputs(0.5),
        requests=10,
        concurrency=2,
    )
    negatives = sum(faulty_is_negative(i, 0.25) for i in range(20)) + sum(
        faulty_is_negative(i, 0.5) for i in range(10)
    )
    assert negatives == 10
    assert (http.failed, grpc.failed) == (5, 5)
    assert http.succeeded + grpc.succeeded == 20
    assert all("negative input" in message for message in http.errors + grpc.errors)

    def delta(now: Scrape, name: str, **labels: str) -> float:
        return now.get(name, model="faulty", version="1", **labels) - before.get(
            name, model="faulty", version="1", **labels
        )

    after = scrape_until(
        triton_server,
        lambda s: delta(s, "nv_inference_request_failure", reason="BACKEND") >= negatives,
    )
    assert delta(after, "nv_inference_request_failure", reason="BACKEND") == negatives
    for reason in ("OTHER", "REJECTED", "CANCELED"):
        assert delta(after, "nv_inference_request_failure", reason=reason) == 0
    assert delta(after, "nv_inference_request_success") == 20
    # Seen on 2.51: inference_count and the summaries count successes only, exec_count all.
    assert delta(after, "nv_inference_count") == 20
    assert delta(after, "nv_inference_exec_count") == 30


def test_streamer_is_decoupled_and_exports_vllm_backend_metrics(
    triton_server: TritonServer,
) -> None:
    before = scrape(triton_server)
    result = stream_requests(
        triton_server.grpc_address,
        "streamer",
        inputs=streamer_inputs(6),
        requests=12,
        concurrency=3,
    )
    assert_clean(result)
    assert result.responses == 12 * 6
    assert len(result.first_response_s) == 12
    pairs = zip(result.first_response_s, result.latencies_s, strict=True)
    assert all(first <= total for first, total in pairs)

    labels = {"model": "streamer", "version": "1"}

    def delta(now: Scrape, name: str, **extra: str) -> float:
        return now.get(name, **labels, **extra) - before.get(name, **labels, **extra)

    # Triton counts the request once its final response is sent, just after the model's own
    # TTFT histogram: wait for both.
    after = scrape_until(
        triton_server,
        lambda s: delta(s, "vllm:time_to_first_token_seconds_count") >= 12
        and delta(s, "nv_inference_request_success") >= 12,
    )
    # Triton counts one request per stream request, however many responses it sent.
    assert delta(after, "nv_inference_request_success") == 12
    assert delta(after, "nv_inference_request_failure", reason="BACKEND") == 0
    assert delta(after, "nv_inference_request_failure", reason="CANCELED") == 0
    # The model's custom families, named and shaped like Triton's vLLM backend.
    assert after.types["vllm:time_to_first_token_seconds"] == "histogram"
    assert after.types["vllm:prompt_tokens"] == "counter"
    assert after.types["vllm:generation_tokens"] == "counter"
    assert delta(after, "vllm:time_to_first_token_seconds_count") == 12
    assert delta(after, "vllm:time_to_first_token_seconds_bucket", le="+Inf") == 12
    # The first response comes after a 10 ms "prefill" sleep.
    assert delta(after, "vllm:time_to_first_token_seconds_bucket", le="0.005") == 0
    assert delta(after, "vllm:time_to_first_token_seconds_sum") >= 12 * 0.010
    assert delta(after, "vllm:generation_tokens") == 12 * 6
    assert delta(after, "vllm:prompt_tokens") == 2 * 12 * 6


def test_demo_load_is_bounded_and_reaches_every_model(triton_server: TritonServer) -> None:
    stop = threading.Event()
    timer = threading.Timer(1.5, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        results = run_demo_load(triton_server, stop, max_duration_s=120.0, pause_s=0.2)
    finally:
        timer.cancel()
    # stopped by the event at 1.5 s (plus the requests in flight), not by max_duration_s
    assert time.monotonic() - started < 60.0
    assert set(results) == {"ranker/1 http", "ranker/2 grpc", "faulty http", "streamer grpc-stream"}
    for key, result in results.items():
        assert result.sent > 0, key
        if key != "faulty http":
            assert_clean(result)
    faulty = results["faulty http"]
    assert faulty.failed == sum(faulty_is_negative(i, 0.1) for i in range(faulty.sent))


#: Runs in a fresh interpreter against the module's Triton (its addresses in argv), so
#: that no other test's threads or descriptors move the counts: a round, the counts at
#: rest, 3 rounds, then whether the process settles back to them.
ROUNDS = """
import sys, threading, types
from fleetwatch.clients.triton.stream import stream_requests
from fleetwatch.demo.load import run_demo_load, streamer_inputs
from tests.support.helpers import held, held_at_rest, settles_back

server = types.SimpleNamespace(http_address=sys.argv[1], grpc_address=sys.argv[2],
                               running=True)

def rounds(n):
    for _ in range(n):
        run_demo_load(server, threading.Event(), max_duration_s=1.0, pause_s=0.0)
        stream_requests(server.grpc_address, "streamer", inputs=streamer_inputs(4),
                        requests=2, timeout_s=0.001)

rounds(1)  # imports, the clients' first channels
before = held_at_rest()
rounds(3)
settles_back(before, "3 rounds of the demo's load and of cancelled streams")
print("held", before, held())
"""


def test_rounds_of_load_hold_no_more_threads_or_descriptors(
        triton_server: TritonServer) -> None:
    """The demo sends rounds for hours, each on new worker threads: every protocol's
    clients give back what they held, also a stream whose requests timed out (cancelled:
    tritonclient then leaves gRPC's request thread waiting unless its stream is ended)."""
    done = subprocess.run([sys.executable, "-c", ROUNDS, triton_server.http_address,
                           triton_server.grpc_address], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("held "), done.stdout


def test_load_refuses_non_loopback_targets() -> None:
    with pytest.raises(ValueError, match="loopback"):
        send_requests("10.1.2.3:8000", "ranker", inputs=ranker_inputs, requests=1)
    with pytest.raises(ValueError, match="loopback"):
        stream_requests("example.com:8001", "streamer", inputs=streamer_inputs(), requests=1)
    with pytest.raises(ValueError, match="concurrency"):
        send_requests("127.0.0.1:8000", "ranker", inputs=ranker_inputs, concurrency=0)


def test_unload_and_reload() -> None:
    """Seen on Triton 2.51: a reload restarts the success counter but not the failure counter.

    On a server of its own, so that nothing the module's other tests sent (cancelled
    streams, timed-out clients) is still held by the server whose model it unloads."""
    with TritonServer(models=["faulty"]) as server:
        _unload_and_reload(server)


def _unload_and_reload(triton_server: TritonServer) -> None:
    labels = {"model": "faulty", "version": "1"}
    result = send_requests(
        triton_server.http_address, "faulty", inputs=faulty_inputs(0.5), requests=4
    )
    assert (result.succeeded, result.failed) == (2, 2)
    before = scrape(triton_server)
    failures_before = before.get("nv_inference_request_failure", reason="BACKEND", **labels)
    assert failures_before >= 2
    assert before.get("nv_inference_request_success", **labels) >= 2

    triton_server.unload_model("faulty")
    assert not triton_server.is_model_ready("faulty")
    unloaded = scrape(triton_server)
    # The per-model series go away with the model, except the failure counters, which stay.
    assert not unloaded.has("nv_inference_request_success", **labels)
    assert not unloaded.has("nv_inference_count", **labels)
    assert (
        unloaded.get("nv_inference_request_failure", reason="BACKEND", **labels) == failures_before
    )

    triton_server.load_model("faulty")
    assert triton_server.is_model_ready("faulty")
    result = send_requests(
        triton_server.http_address, "faulty", inputs=faulty_inputs(0.5), requests=2
    )
    assert (result.succeeded, result.failed) == (1, 1)
    reloaded = scrape_until(
        triton_server,
        lambda s: s.get("nv_inference_request_success", **labels) >= 1
        and s.get("nv_inference_request_failure", reason="BACKEND", **labels) > failures_before,
    )
    assert reloaded.get("nv_inference_request_success", **labels) == 1
    assert (
        reloaded.get("nv_inference_request_failure", reason="BACKEND", **labels)
        == failures_before + 1
    )


def test_start_error_carries_the_log_tail(tmp_path) -> None:
    server = TritonServer(["no_such_model"], start_timeout_s=30.0, workdir=tmp_path)
    with pytest.raises(TritonStartError) as raised:
        server.start()
    assert "no_such_model" in str(raised.value)
    assert not server.running
    assert (tmp_path / "tritonserver.log").is_file()
