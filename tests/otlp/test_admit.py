"""Hostile spans (issue 25): every span judged before it touches state — times against the
sidecar's clock, finite bounded durations, bounded attributes and model names, bounded
trace state — and SLO events booked at the sidecar's clock. The payloads are hand-built
OTLP protobufs (opentelemetry-proto: the real wire format) fed to the real receiver and
SLO engine."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from fleetwatch.exporters.assemble import Part
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.otlp.config import TracesConfig
from fleetwatch.otlp.decode import decode_spans
from fleetwatch.otlp.receiver import TraceReceiver, receiver_metrics
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.status import slo_document, strict_json
from fleetwatch.slo.spec import parse_slo_file
from fleetwatch.traces.histograms import overlay
from tests.support.trace_helpers import OTLP, T0, body, triton_request, vllm_request

DAY_MS = 86_400_000
VLLM_CAPTURE = OTLP / "vllm-0.32-llm_request.pb"

SLOS = {"slos": [
    {"name": "avail", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
     "timeWindow": [{"duration": "1h"}], "concurrency": {"envelope": 4, "bands": [1, 4]}},
    {"name": "e2e", "selector": {"models": ["ranker", "llm"]},
     "sli": {"source": "traces", "latency": {
        "metric": "request", "threshold_seconds": 0.012}},
     "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1h"}],
     "concurrency": {"envelope": 4, "bands": [1, 2, 4, 8]}}]}
VLLM_BODY = ('vllm:num_requests_running{model_name="m"} 2\n'
             'vllm:request_success_total{model_name="m",finished_reason="stop"} %d\n'
             'vllm:request_success_total{model_name="m",finished_reason="abort"} %d\n')


def _run(day_ahead: bool) -> tuple[object, TraceReceiver]:
    """Metric snapshots and traced requests into one engine; with ``day_ahead`` one span
    dated a day ahead of the sidecar's clock arrives in the middle. Returns ``/slo``."""
    engine = SLOEngine(parse_slo_file(SLOS))
    rec = TraceReceiver(TracesConfig(settle_seconds=0), engine)
    norm = Normalizer(TABLES["vllm"])
    for i in range(6):  # the budget of "avail" burns: one abort in ten
        engine.update(Snapshot(T0 + 5 * i, {"vllm": norm.normalize(VLLM_BODY % (9 * i, i))}))
    spans = [s for i, ms in enumerate((5, 20, 8)) for s in triton_request(i, e2e_ms=ms,
                                                                          start_ms=20_000)]
    rec.ingest(body(spans), "application/x-protobuf", now=T0 + 25)
    if day_ahead:
        ahead = triton_request(99, e2e_ms=5, start_ms=20_000 + DAY_MS)
        rec.ingest(body(ahead), "application/x-protobuf", now=T0 + 26)
    rec.tick(now=T0 + 27)
    for i in range(6, 12):  # the windows go on sliding at the sidecar's clock
        engine.update(Snapshot(T0 + 5 * i, {"vllm": norm.normalize(VLLM_BODY % (9 * i, i))}))
    return strict_json(slo_document(engine)), rec


def test_a_day_ahead_span_leaves_every_slos_windows_and_budget_unchanged() -> None:
    (clean, _), (attacked, rec) = _run(False), _run(True)
    assert attacked == clean
    states = {s["slo"]: s for s in clean["slos"]}  # type: ignore[index]
    assert set(states) == {"avail", "e2e"}
    assert all(s["events"]["all"] > 0 for s in states.values())  # both SLOs booked events
    assert rec.refused_spans["future"] == 3  # the day-ahead request's three spans


def test_trace_events_are_booked_at_the_sidecars_clock_not_the_spans() -> None:
    """A span 4 minutes ahead (within the skew bound) is used, but its SLO event counts at
    the receiver's clock: the engine's windows never run ahead of the sidecar."""
    engine = SLOEngine(parse_slo_file(SLOS))
    events: list = []
    rec = TraceReceiver(TracesConfig(settle_seconds=0), engine, sink=events.extend)
    ahead = triton_request(1, e2e_ms=5, start_ms=240_000)
    rec.ingest(body(ahead), "application/x-protobuf", now=T0)
    rec.tick(now=T0 + 1)
    assert [e.time for e in events] == [T0]


def _vllm_with(e2e: float, trace: int, start_s: float = 0.0) -> PbSpan:
    span = vllm_request(trace, 0.01, 1.0, 4, start_s=start_s)
    for kv in span.attributes:
        if kv.key == "gen_ai.latency.e2e":
            kv.value.double_value = e2e
    return span


@pytest.mark.parametrize("e2e", [math.inf, 1e308, -1.0, math.nan])
def test_a_non_finite_huge_or_negative_e2e_is_refused_and_leaves_the_load_unchanged(
        e2e: float) -> None:
    slos = parse_slo_file(SLOS)
    engine = SLOEngine(slos)
    rec = TraceReceiver(TracesConfig(settle_seconds=0, vllm_model="llm"), engine)
    # six requests in flight together (each 1 s, started 0.1 s apart)
    first = [_vllm_with(1.0, i, start_s=i * 0.1) for i in range(6)]
    rec.ingest(body(first), "application/x-protobuf", now=T0 + 2)
    before = sum(len(e) for e in rec.estimator._ends.values())
    rec.ingest(body([_vllm_with(e2e, 100, start_s=0.2)]), "application/x-protobuf",
               now=T0 + 2)
    after = sum(len(e) for e in rec.estimator._ends.values())
    later = [_vllm_with(1.0, 200 + i, start_s=10 + i * 0.1) for i in range(6)]
    rec.ingest(body(later), "application/x-protobuf", now=T0 + 12)
    rec.tick(now=T0 + 13)
    st = engine.states[("e2e", next(k for _, k in engine.states))]
    # every request saw about six in the system: band 8, none in another band
    assert dict(st.events) == {"8": 12, "all": 12}
    assert after == before and rec.refused_spans["bad_duration"] == 1


def test_a_1mb_attribute_is_refused_and_metrics_and_status_stay_small() -> None:
    engine = SLOEngine(parse_slo_file(SLOS))
    rec = TraceReceiver(TracesConfig(settle_seconds=0, vllm_model="llm",
                                     max_body_bytes=16 << 20), engine)
    huge = "m" * (1 << 20)
    tri = triton_request(1, model=huge, start_ms=0)
    llm = vllm_request(2, 0.01, 0.5, 4)
    llm.attributes.add(key="gen_ai.response.model").value.string_value = huge
    other = vllm_request(3, 0.01, 0.5, 4)
    other.attributes.add(key="user.note").value.string_value = huge
    n = rec.ingest(body([*tri, llm, other]), "application/x-protobuf", now=T0 + 1)
    rec.tick(now=T0 + 2)
    metrics = receiver_metrics(rec)() + "\n".join(
        line for f in overlay(Part("normalized", []), rec.histograms).families
        for line in f.lines).encode()
    assert len(metrics) < 64 * 1024
    assert len(json.dumps(strict_json(slo_document(engine)))) < 64 * 1024
    assert n == 5 and rec.refused_spans["attribute_too_long"] == 3  # model span, 2 vLLM


def test_a_model_name_longer_than_the_label_bound_is_refused() -> None:
    rec = TraceReceiver(TracesConfig(settle_seconds=0), max_label_value_length=64)
    rec.ingest(body(triton_request(1, model="r" * 65)), "application/x-protobuf", now=T0)
    rec.ingest(body(triton_request(2, model="r" * 64)), "application/x-protobuf", now=T0)
    rec.tick(now=T0 + 60)
    assert rec.refused_spans["label_too_long"] == 1
    assert [mk.model for mk in rec.models] == ["r" * 64]


def test_a_flood_of_unique_models_and_trace_ids_keeps_trace_state_within_its_caps() -> None:
    """The defaults bound it (traces.max_models 1000, buffer_traces 10 000, buffer_spans
    40 000); small caps are checked the same way."""
    default = TraceReceiver(TracesConfig(settle_seconds=0))
    for start in range(0, 2000, 100):
        spans = [s for i in range(start, start + 100)
                 for s in triton_request(i, model=f"m{i}", start_ms=i)]
        default.ingest(body(spans), "application/x-protobuf", now=T0 + 5)
    assert len(default.histograms.seen) == default.estimator.models == 1000
    cfg = TracesConfig(settle_seconds=0, max_models=50, buffer_traces=100, buffer_spans=300)
    rec = TraceReceiver(cfg, SLOEngine(parse_slo_file(SLOS)))
    for start in range(0, 2000, 50):  # complete requests of 2000 models
        spans = [s for i in range(start, start + 50)
                 for s in triton_request(i, model=f"m{i}", start_ms=i)]
        rec.ingest(body(spans), "application/x-protobuf", now=T0 + 5)
    for start in range(10_000, 14_000, 1000):  # traces that never complete
        spans = [triton_request(i)[0] for i in range(start, start + 1000)]
        rec.ingest(body(spans), "application/x-protobuf", now=T0 + 5)
    rec.tick(now=T0 + 6)
    assert len(rec.models) == 50 and rec.refused_spans["too_many_models"] == 1950
    assert len(rec.histograms.seen) <= 50 and rec.estimator.models <= 50
    assert rec.joiner.pending <= 100 and rec.joiner._held <= 300
    assert rec.estimator.intervals <= rec.estimator.max_total_intervals


def test_every_member_of_a_two_member_gzip_body_is_read() -> None:
    rec = TraceReceiver(TracesConfig(settle_seconds=0))
    a, b = body(triton_request(1)), body(triton_request(2))
    n = rec.ingest(gzip.compress(a) + gzip.compress(b), "application/x-protobuf", "gzip",
                   now=T0)
    rec.tick(now=T0 + 1)
    assert n == 6 and rec.joiner.stats.requests == 2


def test_the_real_engines_captured_spans_are_all_admitted() -> None:
    """The captures of real Triton 2.51 and vLLM 0.32 exports (tests/fixtures/otlp) pass
    every bound, judged at their own time (the default bounds refuse nothing real)."""
    from fleetwatch.otlp.admit import SpanBounds, refusal

    for path in sorted(OTLP.iterdir()):
        spans = decode_spans(path.read_bytes())
        now = max(max(s.start_ns, s.end_ns) for s in spans) * 1e-9 + 1
        assert [refusal(s, now, SpanBounds()) for s in spans] == [None] * len(spans), path


@pytest.mark.parametrize("e2e", [-0.5, math.inf, 1e308, math.nan])
def test_a_real_vllm_span_with_a_hostile_e2e_is_refused_and_counted(e2e: float) -> None:
    """vLLM 0.32's own ``llm_request`` span (tests/fixtures/otlp, captured from the real
    engine) with its ``gen_ai.latency.e2e`` replaced: refused as ``bad_duration``, while
    the span as captured is used."""
    req = ExportTraceServiceRequest.FromString(VLLM_CAPTURE.read_bytes())
    spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    now = max(s.end_time_unix_nano for s in spans) * 1e-9 + 1
    rec = TraceReceiver(TracesConfig(settle_seconds=0, vllm_model="tiny-llm"))
    rec.ingest(req.SerializeToString(), "application/x-protobuf", now=now)
    used = rec.joiner.stats.requests
    assert used >= 1
    for span in spans:
        for kv in span.attributes:
            if kv.key == "gen_ai.latency.e2e":
                kv.value.double_value = e2e
    rec.ingest(req.SerializeToString(), "application/x-protobuf", now=now)
    assert rec.joiner.stats.requests == used  # the hostile copy is not used
    assert dict(rec.refused_spans) == {"bad_duration": used}
