"""OTLP traces without servers: decoding real Triton 2.51 / vLLM 0.32 bodies, the join,
hostile bodies, exact and goodput judging into the engine, histograms, forwarding to a
downstream test double, the OTLP metrics export and ``fleetwatch traces``."""

from __future__ import annotations

import gzip
import json
import math
import socket
import time
import urllib.error
import urllib.request
import zlib

import pytest
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.exporters.assemble import Family, Part
from fleetwatch.otlp.config import TracesConfig
from fleetwatch.otlp.decode import Limits, OTLPDecodeError, decode_request, decode_spans
from fleetwatch.otlp.receiver import TraceReceiver
from fleetwatch.otlp.semconv import GENAI_METRICS as GENAI_METRICS_
from fleetwatch.otlp.semconv import GENAI_NAMES, RECOMMENDED_BUCKETS
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import SLOSpecError, parse_slo_file
from fleetwatch.traces.histograms import BOUNDS, overlay
from fleetwatch.traces.join import TraceJoiner
from tests.support.trace_helpers import (
    OTLP,
    T0,
    DownstreamCollectorDouble,
    ReceiverThread,
    attrs,
    body,
    check_names,
    convention_names,
    decode_metrics,
    points,
    redate_json,
    triton_request,
    vllm_request,
)

RANKER = (OTLP / "triton-2.51-ranker-http.json").read_bytes()
STREAMER = (OTLP / "triton-2.51-streamer-grpc.json").read_bytes()
VLLM = (OTLP / "vllm-0.32-llm_request.pb").read_bytes()


def slo_file(*slos: dict) -> object:
    return parse_slo_file({"slos": [
        {"objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1d"}],
         "concurrency": {"envelope": 4}, **s} for s in slos]})


# -- decoding and joining real bodies ----------------------------------------------------

def test_real_triton_json_joins_to_request_start_end() -> None:
    j = TraceJoiner()
    facts = j.add(decode_spans(RANKER), 0.0)
    assert [f.model for f in facts] == ["ranker"] * 5 and j.pending == 0
    # REQUEST_END - REQUEST_START of the model span, and Triton counted 87947 µs for them
    assert sum(f.e2e_seconds for f in facts) == pytest.approx(0.087947, rel=0.01)
    f = facts[0]
    assert (f.model_version, f.source, f.first_response_seconds) == ("2", "triton", None)
    assert f.queue_seconds < f.e2e_seconds and f.compute_seconds < f.e2e_seconds


def test_real_triton_decoupled_first_response_is_first_send() -> None:
    facts = TraceJoiner().add(decode_spans(STREAMER), 0.0)
    assert len(facts) == 2
    # clients saw the first response after 11.7 and 19.8 ms (tests capture)
    assert [round(f.first_response_seconds, 4) for f in facts] == [0.0106, 0.0194]
    assert all(f.first_response_seconds < f.e2e_seconds for f in facts)


def test_real_vllm_protobuf_facts() -> None:
    facts = TraceJoiner("tiny-llm").add(decode_spans(VLLM), 0.0)
    assert [f.completion_tokens for f in facts] == [8, 1, 12, 8]
    f = facts[0]
    assert f.model == "tiny-llm" and f.ttft_seconds == pytest.approx(0.0245445, rel=1e-5)
    assert f.tpot_seconds == pytest.approx(f.decode_seconds / 7)
    assert facts[1].tpot_seconds is None  # one token: no decode


def test_vllm_startup_spans_are_ignored() -> None:
    j = TraceJoiner()
    assert j.add(decode_spans((OTLP / "vllm-0.32-startup.pb").read_bytes()), 0.0) == []
    assert j.stats.ignored == 3 and j.pending == 0


def test_spans_of_one_request_in_three_bodies_any_order() -> None:
    c, m, r = triton_request(7, e2e_ms=20, queue_ms=3)
    j = TraceJoiner()
    assert j.add(decode_spans(body([r])), 0.0) == []
    assert j.add(decode_spans(body([c])), 1.0) == []
    (f,) = j.add(decode_spans(body([m])), 2.0)
    assert f.e2e_seconds == pytest.approx(0.020) and f.queue_seconds == pytest.approx(0.003)
    assert j.add(decode_spans(body([c])), 3.0) == [] and j.stats.late == 1


def test_json_and_gzip_encodings_decode_alike() -> None:
    pb = decode_spans(RANKER)
    assert decode_spans(gzip.compress(RANKER)) == pb
    assert decode_request(gzip.compress(RANKER), "application/json", "gzip")


# -- hostile bodies and bounds ------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 7, 100, 1000, 2000])
def test_truncated_protobuf_is_refused_or_a_prefix(cut: int) -> None:
    whole = decode_spans(VLLM)
    try:
        got = decode_spans(VLLM[:-cut], "application/x-protobuf")
    except OTLPDecodeError as exc:
        assert exc.reason == "bad_protobuf" and exc.status == 400
    else:  # cut on a field boundary: a valid shorter message, never more or other spans
        assert len(got) < len(whole)


@pytest.mark.parametrize("doc", [
    {"resourceSpans": {"x": 1}},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5, "traceId": [1]}]}]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz-not-hex-nor-b64"}]}]}]},
    [1, 2, 3],
])
def test_wrong_typed_json_is_refused(doc: object) -> None:
    with pytest.raises(OTLPDecodeError) as err:
        decode_request(json.dumps(doc).encode(), "application/json")
    assert err.value.reason == "bad_json" and err.value.status == 400


def test_oversized_gzip_bomb_and_span_flood_are_refused_before_parsing() -> None:
    lim = Limits(max_body_bytes=1 << 20, max_spans=1000)
    with pytest.raises(OTLPDecodeError, match="exceeds") as e1:
        decode_request(gzip.compress(b"\0" * (5 << 20)), "application/x-protobuf", "gzip", lim)
    assert e1.value.reason == "too_large" and e1.value.status == 413
    # 100 MiB of zeros in ~100 KiB of gzip, at the default limit: refused at 4 MiB inflated
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    bomb = b"".join(z.compress(chunk) for _ in range(100)) + z.flush()
    assert len(bomb) < 200_000
    with pytest.raises(OTLPDecodeError) as e100:
        decode_request(bomb, "application/x-protobuf", "gzip",
                       Limits(TracesConfig().max_body_bytes, 8192))
    assert e100.value.reason == "too_large"
    # a million empty spans are 2 MB on the wire: counted on the wire, never parsed
    million = b"\x0a\x88\x84\x3d\x12\x84\x84\x3d" + b"\x12\x00" * 1_000_000
    with pytest.raises(OTLPDecodeError) as e2:
        decode_request(million, "application/x-protobuf", limits=Limits(4 << 20, 8192))
    assert e2.value.reason == "too_many_spans"
    empties = b"\x0a\x00" * 1_000_000  # a million empty resource spans: bounded alike
    with pytest.raises(OTLPDecodeError, match="spans"):
        decode_request(empties, "application/x-protobuf", limits=Limits(4 << 20, 8192))
    flood = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{}] * 10_000}]}]})
    with pytest.raises(OTLPDecodeError) as e3:
        decode_request(flood.encode(), "application/json", limits=lim)
    assert e3.value.reason == "too_many_spans"


def test_join_buffer_maximum_is_reached_and_never_completing_spans_expire() -> None:
    j = TraceJoiner(max_traces=100, timeout_s=5.0)
    # 1000 traces that never complete (compute spans only)
    spans = [triton_request(i)[0] for i in range(1000)]
    assert j.add(decode_spans(body(spans)), 0.0) == []
    assert j.pending == 100 and j.stats.evicted == 900
    assert j.expire(4.9) == [] and j.pending == 100
    assert j.expire(5.0) == [] and j.pending == 0 and j.stats.expired == 100
    # a trace with its model span but not its root is emitted as partial on timeout
    c, m, _ = triton_request(5000)
    j.add(decode_spans(body([c, m])), 10.0)
    (f,) = j.expire(20.0)
    assert f.model == "ranker" and j.stats.partial == 1


# -- judging: exact thresholds, goodput, sampling, into the engine -------------------------

def _receiver(slos: object, **cfg: object) -> tuple[TraceReceiver, SLOEngine]:
    engine = SLOEngine(slos)  # type: ignore[arg-type]
    return TraceReceiver(TracesConfig(settle_seconds=0, vllm_model="llm", **cfg),
                         engine), engine


def test_goodput_and_any_threshold_latency_slis_from_traces() -> None:
    slos = slo_file(
        {"name": "good", "selector": {"models": ["llm"]},
         "sli": {"source": "traces", "goodput": [
             {"metric": "ttft", "threshold_seconds": 0.2},
             {"metric": "tpot", "threshold_seconds": 0.05}]}},
        {"name": "ttft-137ms", "selector": {"models": ["llm"]},
         "sli": {"source": "traces", "latency": {"metric": "ttft", "threshold_seconds": 0.137}}},
        {"name": "ranker-e2e", "selector": {"models": ["ranker"]},
         "sli": {"source": "traces", "sampling": 10,
                 "latency": {"metric": "request", "threshold_seconds": 0.015}}})
    rec, engine = _receiver(slos)
    # (ttft, e2e, tokens): tpot = (e2e - ttft) / (tokens - 1)
    llm = [(0.1, 0.5, 9), (0.3, 0.4, 3), (0.1, 1.0, 5), (0.19, 0.19, 1), (0.136, 0.2, 2)]
    spans = [vllm_request(i, *x, start_s=i) for i, x in enumerate(llm)]
    rec.ingest(body(spans), "application/x-protobuf", now=T0 + 100)
    tri = [s for i, ms in enumerate((10, 20, 14)) for s in triton_request(100 + i, e2e_ms=ms)]
    rec.ingest(body(tri), "application/x-protobuf", now=T0 + 100)
    rec.tick(now=T0 + 101)
    st = {(k[0], k[1].model): v for k, v in engine.states.items()}
    # goodput: both ttft ≤ 0.2 and tpot ≤ 0.05: requests 0 (0.05), 3 (one token), 4 (0.064 no)
    assert (st["good", "llm"].good["all"], st["good", "llm"].events["all"]) == (2, 5)
    assert st["ttft-137ms", "llm"].good["all"] == 3  # 0.1, 0.1, 0.136 ≤ 0.137 < 0.19
    # sampling 10: each traced request is 10 events
    assert (st["ranker-e2e", "ranker"].good["all"],
            st["ranker-e2e", "ranker"].events["all"]) == (20, 30)
    assert st["good", "llm"].state in ("ok", "regression", "overload")


def test_trace_slis_land_in_the_band_of_their_own_load() -> None:
    slos = slo_file({"name": "e2e", "sli": {"source": "traces", "latency": {
        "metric": "request", "threshold_seconds": 1.0}}, "concurrency": {
            "envelope": 4, "bands": [1, 2, 4, 8]}})
    rec, engine = _receiver(slos)
    # four requests fully overlapping: each saw 4 in the system
    spans = [s for i in range(4) for s in triton_request(i, e2e_ms=50)]
    rec.ingest(body(spans), "application/x-protobuf", now=T0)
    rec.tick(now=T0 + 1)
    (st,) = engine.states.values()
    assert dict(st.events) == {"4": 4, "all": 4}


def test_trace_only_models_are_forgotten_by_the_no_data_timer() -> None:
    """Models seen only in spans (no metric ever names them) get engine state through
    add_events; after limits.forget_model_after without a request their SLO states and
    window rows are freed by the engine's no-data timer — as a metric model's are — and
    the receiver's histograms and load state for them go too: a stream of ever-new model
    names keeps the state bounded."""
    from fleetwatch.exporters.snapshot import Snapshot

    slos = parse_slo_file({"limits": {"max_models_per_slo": 50, "forget_model_after": 60},
                           "slos": [{"name": "e2e", "sli": {"source": "traces", "latency": {
                               "metric": "request", "threshold_seconds": 1.0}},
                               "objectives": [{"target": 0.9}],
                               "timeWindow": [{"duration": "1d"}],
                               "concurrency": {"envelope": 4}}]})
    rec, engine = _receiver(slos)
    t0 = T0
    rows = engine.ledger.windows.rows

    def models(first: int, n: int, at: float) -> None:
        spans = [s for i in range(first, first + n)
                 for s in triton_request(i, model=f"m{i}", start_ms=int((at - t0) * 1000))]
        rec.ingest(body(spans), "application/x-protobuf", now=at)
        rec.tick(now=at + 1)

    models(0, 60, t0)
    assert len(engine.states) == 50 and engine.models_refused["e2e"] == 10
    assert len(rows) == 50 * 2  # per model: its band's row and "all"
    assert len(rec.histograms.seen) == rec.estimator.models == 60
    engine.update(Snapshot(t0 + 30, {}))  # a scrape cycle: 30 s of no data keeps them
    assert len(engine.states) == 50
    engine.update(Snapshot(t0 + 61, {}))  # 60 s without a request: forgotten
    rec.tick(now=t0 + 61)
    assert engine.states == {} and len(rows) == 0
    assert rec.histograms.hists == {} and rec.histograms.seen == {}
    assert rec.estimator.models == 0
    models(1000, 50, t0 + 62)  # new models are tracked again, none refused
    assert len(engine.states) == 50 and engine.models_refused["e2e"] == 10


def test_spec_rules_for_trace_slis() -> None:
    with pytest.raises(SLOSpecError, match="goodput needs source: traces"):
        slo_file({"name": "x", "sli": {"goodput": [{"metric": "ttft", "threshold_seconds": 1}]}})
    with pytest.raises(SLOSpecError, match="not in traces"):
        slo_file({"name": "x", "sli": {"source": "traces",
                                       "latency": {"metric": "itl", "threshold_seconds": 1}}})
    with pytest.raises(SLOSpecError, match="sampling applies"):
        slo_file({"name": "x", "sli": {"sampling": 2, "availability": {}}})


# -- histograms ----------------------------------------------------------------------------

def test_trace_buckets_replace_triton_mean_only_series() -> None:
    rec = TraceReceiver(TracesConfig())
    spans = [s for i, ms in enumerate((3, 30, 300)) for s in triton_request(i, e2e_ms=ms)]
    rec.ingest(body(spans), "application/x-protobuf", now=T0)
    fam = "modelserver_request_duration_seconds"
    lab = 'model="ranker",model_version="1",backend="triton",runtime="python"'
    mean_only = Part("normalized", [Family(fam, "histogram", "h", [
        f'{fam}_bucket{{{lab},le="+Inf"}} 3', f"{fam}_sum{{{lab}}} 0.333",
        f"{fam}_count{{{lab}}} 3",
        f'{fam}_bucket{{model="other",model_version="1",backend="triton",le="+Inf"}} 1'])])
    lines = overlay(mean_only, rec.histograms).families[0].lines
    ours = [x for x in lines if 'model="ranker"' in x]
    assert len(ours) == len(BOUNDS) + 3 and all('runtime="python"' in x for x in ours)
    assert f'{fam}_bucket{{{lab},le="0.005"}} 1' in ours
    assert f'{fam}_bucket{{{lab},le="0.05"}} 2' in ours
    assert any('model="other"' in x for x in lines)  # untraced models untouched


# -- the HTTP receiver, forwarding ------------------------------------------------------------

def _post(url: str, data: bytes, ctype: str, **headers: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": ctype, **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _announce_100mb(port: int) -> bytes:
    """A 100 MB body announced by Content-Length: the answer comes before it is sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/x-protobuf\r\nContent-Length: 104857600\r\n\r\n" +
                     b"\0" * 65536)
        return sock.recv(4096)


def test_receiver_answers_otlp_and_forwards_every_span_unchanged() -> None:
    with DownstreamCollectorDouble() as downstream:
        cfg = TracesConfig(max_body_bytes=1 << 20, forward={"url": downstream.url})
        with ReceiverThread(TraceReceiver(cfg)) as rt:
            gz = gzip.compress(VLLM)
            assert _post(rt.url, RANKER, "application/json") == (200, b"{}")
            assert _post(rt.url, gz, "application/x-protobuf",
                         **{"Content-Encoding": "gzip"}) == (200, b"")
            code, err = _post(rt.url, b"{not json", "application/json")
            assert code == 400 and json.loads(err)["code"] == 3
            code, err = _post(rt.url, VLLM[:-7], "application/x-protobuf")
            assert code == 400 and err[:1] == b"\x08"  # google.rpc.Status, protobuf
            assert _announce_100mb(rt.port).startswith(b"HTTP/1.1 413")
            chunked = _post(rt.url, iter([b"\0" * (1 << 19)] * 4), "application/x-protobuf")
            assert chunked[0] == 413  # no Content-Length: refused while read, at 1 MiB
            assert _post(rt.url, RANKER, "text/plain")[0] == 415
            # the collector holds a body before the forwarder records its answer: wait for both
            deadline = time.time() + 30
            while ((len(downstream.received) < 2
                    or sum(dict(rt.receiver.forwarder.results).values()) < 2)
                   and time.time() < deadline):
                time.sleep(0.05)
            refused = dict(rt.receiver.refused)
            results = dict(rt.receiver.forwarder.results)
    assert refused == {"bad_json": 1, "bad_protobuf": 1, "too_large": 2,
                       "unsupported_media_type": 1}
    # the same bytes; in either order: the forwarder posts bodies concurrently (up to
    # max_in_flight), as OTLP exports are independent
    assert sorted(b for b, _ in downstream.received) == sorted([RANKER, gz])
    headers = {body: h for body, h in downstream.received}
    assert headers[gz]["content-encoding"] == "gzip"
    assert "content-encoding" not in headers[RANKER]
    assert results == {"ok": 2}


# -- OTLP metrics export -------------------------------------------------------------------

GOLDEN = OTLP.parent.parent / "golden"
VLLM_NORMALIZED = GOLDEN / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-under-load.prom.normalized.prom"
TRITON_NORMALIZED = (GOLDEN / "triton" /
                     "triton-2.51.0-pytriton-cpu-two-models-summaries.prom.normalized.prom")
DCGM_NORMALIZED = GOLDEN / "dcgm" / "dcgm-exporter-2026-ericsson-T4-loaded-no-help-type.prom.normalized.prom"


def _export(normalized: Part | None, facts: list) -> dict:
    from fleetwatch.otlp.config import MetricsExport
    from fleetwatch.otlp.metrics_export import MetricsExporter

    with DownstreamCollectorDouble() as collector:
        exp = MetricsExporter(MetricsExport(endpoint=collector.url.replace("traces", "metrics"),
                                            headers={"x-tenant": "t1"}),
                              (lambda: normalized) if normalized is not None else None)
        exp.record(facts)
        assert exp.export()
        exp.shutdown()
    ((payload, headers),) = collector.received
    assert headers["x-tenant"] == "t1" and headers["content-type"] == "application/x-protobuf"
    return decode_metrics(payload)


def test_otlp_metrics_of_trace_requests_carry_genai_names_attributes_and_buckets() -> None:
    facts = TraceJoiner("tiny-llm").add(decode_spans(VLLM), 0.0)
    facts += TraceJoiner().add(decode_spans(RANKER), 0.0)
    metrics = _export(None, facts)
    check_names(metrics, set(GENAI_NAMES))
    assert {"gen_ai.server.request.duration", "gen_ai.server.time_to_first_token",
            "gen_ai.server.time_per_output_token", "modelserver.request.duration",
            "modelserver.queue.duration"} <= set(metrics)
    ((scope, ttft),) = metrics["gen_ai.server.time_to_first_token"]
    (dp,) = points(ttft)
    assert scope == "fleetwatch.traces" and dp.count == 4
    assert tuple(dp.explicit_bounds) == RECOMMENDED_BUCKETS["gen_ai.server.time_to_first_token"]
    assert attrs(dp) == {"gen_ai.operation.name": "text_completion",
                         "gen_ai.provider.name": "vllm", "gen_ai.request.model": "tiny-llm"}
    # the ranking model has no GenAI metric: its own namespace, the trace bounds
    ((_, req),) = metrics["modelserver.request.duration"]
    (rp,) = points(req)
    assert attrs(rp) == {"modelserver.model": "ranker", "modelserver.model.version": "2",
                         "modelserver.backend": "triton"}
    assert tuple(rp.explicit_bounds) == BOUNDS and rp.count == 5


def test_otlp_metrics_export_every_normalized_family() -> None:
    """The normalized schema of a real vLLM 0.32, Triton 2.51 and dcgm-exporter exposition
    (the goldens): every family but summaries, names and units from the schema table, counters
    cumulative monotonic sums with the same values, histograms with the same counts in
    the recommended GenAI bounds where those are a subset of vLLM's, else vLLM's own."""
    from fleetwatch.exporters.assemble import parse_families
    from fleetwatch.labels.schema import METRICS_BY_NAME
    from fleetwatch.otlp.semconv import metric_name, unit

    fams = parse_families(VLLM_NORMALIZED.read_text() + TRITON_NORMALIZED.read_text()
                          + DCGM_NORMALIZED.read_text())
    metrics = _export(Part("normalized", fams), [])
    check_names(metrics, set(GENAI_NAMES))
    expected = set()
    for fam in fams:
        mdef = METRICS_BY_NAME[fam.name]
        if mdef.type == "summary":
            continue
        llm = {'runtime="vllm"' in x for x in fam.lines}
        expected |= {metric_name(mdef, v) for v in llm}
        for v in llm:
            ((_, m),) = metrics[metric_name(mdef, v)]
            assert m.unit == unit(mdef) and m.description == mdef.help
    assert set(metrics) == expected
    assert not any(n.startswith("gen_ai.") for n in metrics if "summary" in n)
    # a counter: the same value, cumulative and monotonic
    ((_, reqs),) = metrics["modelserver.requests"]
    assert reqs.sum.is_monotonic and reqs.sum.aggregation_temporality == 2
    vllm_ok = [p for p in points(reqs) if attrs(p).get("gen_ai.request.model") == "tiny-llm"
               and attrs(p).get("modelserver.finish_reason") == "length"]
    line = next(x for f in fams if f.name == "modelserver_requests_total" for x in f.lines
                if 'model="tiny-llm"' in x and 'finish_reason="length"' in x)
    assert [p.as_double for p in vllm_ok] == [float(line.rsplit(" ", 1)[1])]
    assert all(p.start_time_unix_nano > 0 for p in points(reqs))
    # TTFT: recommended bounds, the same cumulative counts as vLLM's buckets there
    ((_, ttft),) = metrics["gen_ai.server.time_to_first_token"]
    (dp,) = points(ttft)
    rec = RECOMMENDED_BUCKETS["gen_ai.server.time_to_first_token"]
    assert tuple(dp.explicit_bounds) == rec
    cum = {float(x.split('le="')[1].split('"')[0]): float(x.rsplit(" ", 1)[1])
           for f in fams if f.name == "modelserver_time_to_first_token_seconds"
           for x in f.lines if "_bucket" in x}
    acc = 0
    for le, c in zip([*rec, math.inf], dp.bucket_counts, strict=True):
        acc += c
        assert acc == cum[le], le
    assert dp.count == cum[math.inf]
    assert attrs(dp)["gen_ai.operation.name"] == "text_completion"
    assert attrs(dp)["gen_ai.provider.name"] == "vllm"
    # e2e: vLLM's bounds lack the recommended 0.01 … (they start at 0.3 s): kept as they are
    ((_, e2e),) = metrics["gen_ai.server.request.duration"]
    (ep,) = points(e2e)
    assert ep.explicit_bounds[0] == 0.3 and sum(ep.bucket_counts) == ep.count
    # Triton's models: their own namespace, mean-only histograms as one bucket
    ((_, tri),) = metrics["modelserver.request.duration"]
    tri_models = {x.split('model="')[1].split('"')[0] for f in fams
                  if f.name == "modelserver_request_duration_seconds" for x in f.lines
                  if 'backend="triton"' in x}
    assert {attrs(p)["modelserver.model"] for p in points(tri)} == tri_models == {
        "add", "identity_dyn"}
    assert all(list(p.bucket_counts) == [p.count] and not p.explicit_bounds
               for p in points(tri))
    # a GPU family gets the hardware conventions' name, required hw.id and hw.type
    ((_, gpu),) = metrics["hw.gpu.utilization"]
    assert points(gpu) and all(attrs(p)["hw.type"] == "gpu" and attrs(p)["hw.id"]
                               for p in points(gpu))


def test_otlp_names_come_from_the_schema_table() -> None:
    """Every normalized family has one OTLP name per kind of model, distinct across
    families, a gen_ai.* one only where the conventions define that metric."""
    from fleetwatch.labels.schema import METRICS
    from fleetwatch.otlp.semconv import GENAI_METRICS, metric_name

    metric_names, attribute_names = convention_names()
    seen: dict[str, str] = {}
    for mdef in METRICS:
        for llm in (True, False):
            name = metric_name(mdef, llm)
            assert seen.setdefault(name, mdef.name) == mdef.name, name
            assert name.startswith("modelserver.") or name in metric_names, name
            if not llm:
                assert not name.startswith("gen_ai."), name
    assert {"gen_ai.server.request.duration",
                             "gen_ai.server.time_to_first_token",
                             "gen_ai.server.time_per_output_token"} == GENAI_METRICS
    # the cached-token family's schema name is a span attribute of the conventions
    assert "gen_ai.usage.cache_read.input_tokens" in attribute_names
    assert metric_name(next(m for m in METRICS if m.name ==
                            "modelserver_cached_input_tokens_total"), True) \
        == "modelserver.cached_input_tokens"


def test_allow_list_is_the_conventions() -> None:
    metric_names, attribute_names = convention_names()
    assert metric_names >= GENAI_METRICS_
    assert attribute_names >= GENAI_NAMES - GENAI_METRICS_


def test_a_failing_otlp_endpoint_is_counted_never_raised() -> None:
    from fleetwatch.otlp.config import MetricsExport
    from fleetwatch.otlp.metrics_export import MetricsExporter
    from tests.support.helpers import _free_port

    exp = MetricsExporter(MetricsExport(endpoint=f"http://127.0.0.1:{_free_port()}/v1/metrics",
                                        timeout_seconds=1))
    assert exp.export() is False and exp.results["error"] == 1
    exp.shutdown()


# -- fleetwatch traces ---------------------------------------------------------------------

def test_cli_json_and_metrics(tmp_path) -> None:
    files = [str(OTLP / n) for n in ("triton-2.51-ranker-http.json",
                                     "triton-2.51-streamer-grpc.json",
                                     "vllm-0.32-llm_request.pb")]
    r = CliRunner().invoke(main, ["traces", *files, "--json", "--vllm-model", "tiny-llm"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 11 and {x["source"] for x in rows} == {"triton", "vllm"}
    need = {"model", "model_version", "source", "start_unix_s", "e2e_seconds", "queue_seconds"}
    assert all(need <= set(x) for x in rows)
    assert sum(x["first_response_seconds"] is not None for x in rows) == 2
    m = CliRunner().invoke(main, ["traces", *files, "--metrics"])
    assert 'modelserver_time_to_first_token_seconds_count{model="vllm"' in m.stdout
    bad = tmp_path / "bad.pb"
    bad.write_bytes(VLLM[:-7])
    r = CliRunner().invoke(main, ["traces", str(bad)])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"fleetwatch: error: {bad}: not an OTLP trace export")
    assert len(r.stderr.splitlines()) == 1
    empty = tmp_path / "empty.pb"
    empty.write_bytes(b"")
    r = CliRunner().invoke(main, ["traces", str(empty)])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == f"fleetwatch: error: {empty}: empty: not an OTLP trace export\n"
    text = tmp_path / "notes.txt"
    text.write_text("these are notes, not spans\n")
    r = CliRunner().invoke(main, ["traces", str(text)])
    assert r.exit_code == 2 and "text, but not OTLP JSON (it does not start with '{')" in r.stderr
    assert math.isfinite(rows[0]["e2e_seconds"])


# -- the whole sidecar with a traces: section ----------------------------------------------

def test_run_sidecar_serves_receiver_metrics_buckets_and_slo_source() -> None:
    import asyncio
    import threading

    from fleetwatch.sidecar.config import parse_config
    from fleetwatch.sidecar.server import run_sidecar
    from tests.support.helpers import _free_port

    tport = _free_port()
    cfg = parse_config({
        "listen": {"address": "127.0.0.1", "port": 0},
        "scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.5},
        "targets": [{"name": "t", "kind": "triton", "required": False,
                     "url": f"http://127.0.0.1:{_free_port()}/metrics"}],
        "traces": {"listen": {"address": "127.0.0.1", "port": tport}, "settle_seconds": 0}})
    slos = slo_file({"name": "ranker-e2e", "sli": {"source": "traces", "sampling": 2,
                                                    "latency": {"metric": "request",
                                                                "threshold_seconds": 0.01}}})
    ports: list[int] = []
    state: dict = {}

    async def main() -> None:
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        await run_sidecar(cfg, stop=state["stop"], on_ready=ports.append, slos=slos)

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    try:
        deadline = time.time() + 15
        while not ports and time.time() < deadline:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{tport}/v1/traces"
        while time.time() < deadline:
            try:
                assert _post(url, redate_json(RANKER, time.time()),
                             "application/json") == (200, b"{}")
                break
            except urllib.error.URLError:
                time.sleep(0.1)
        assert _post(url, b"\x0a\xff", "application/x-protobuf")[0] == 400
        time.sleep(1.5)  # a receiver tick settles the requests
        base = f"http://127.0.0.1:{ports[0]}"
        metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
        slo = json.loads(urllib.request.urlopen(f"{base}/slo", timeout=10).read())
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(15)
    assert "fleetwatch_traces_spans_total 15.0" in metrics
    assert 'fleetwatch_traces_refused_bodies_total{trace_reason="bad_protobuf"} 1.0' in metrics
    assert ('modelserver_request_duration_seconds_bucket{model="ranker",model_version="2",'
            'backend="triton",le="0.01"} 4') in metrics
    (st,) = slo["slos"]
    assert (st["sli_source"], st["sampling"], st["events"]["all"]) == ("traces", 2, 10)


def test_default_join_buffer_maximum_is_reached() -> None:
    """The documented default (traces.buffer_traces: 10 000) holds under a flood of
    never-completing traces arriving in bodies of 6000 spans."""
    j = TraceJoiner()
    for start in (0, 6000):
        spans = [triton_request(i)[0] for i in range(start, start + 6000)]
        j.add(decode_spans(body(spans)), 0.0)
    assert (j.pending, j.stats.evicted) == (10_000, 2000) == (j.max_traces, 2000)


def test_metrics_export_without_the_otel_extra_exits_naming_the_field(tmp_path,
                                                                      monkeypatch) -> None:
    import sys

    import yaml

    from tests.support.helpers import _free_port

    monkeypatch.setitem(sys.modules, "fleetwatch.otlp.metrics_export", None)  # not installed
    cfg = tmp_path / "sidecar.yaml"
    cfg.write_text(yaml.safe_dump({
        "listen": {"address": "127.0.0.1", "port": 0},
        "targets": [{"name": "t", "kind": "vllm", "required": False,
                     "url": f"http://127.0.0.1:{_free_port()}/metrics"}],
        "metrics_export": {"endpoint": "http://127.0.0.1:4318/v1/metrics"}}))
    r = CliRunner().invoke(main, ["serve", "--config", str(cfg)])
    assert r.exit_code == 1, r.output
    assert "sidecar.yaml: field 'metrics_export'" in r.output
    assert "pip install 'fleetwatch[otel]'" in r.output


def test_cli_table_fits_80_columns_and_wide_has_every_fact() -> None:
    files = [str(p) for p in sorted(OTLP.iterdir())]
    r = CliRunner().invoke(main, ["traces", *files], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    header = next(x for x in lines if x.split()[:1] == ["model"])
    assert header.split() == ["model", "version", "source", "e2e", "queue", "ttft", "tpot",
                              "tokens", "load"]
    rows = [x.split() for x in lines if x.split()[:1] in (["ranker"], ["streamer"], ["vllm"])]
    assert len(rows) == 11 and all(len(row) == 9 for row in rows)  # one line per request
    assert ["vllm", "-", "vllm", "89.4", "0.0", "24.4", "5.9", "13/12", "1.85"] in rows
    w = CliRunner().invoke(main, ["traces", "--wide", *files], env={"COLUMNS": "80"})
    assert w.exit_code == 0, w.output
    wide = w.stdout.splitlines()
    assert "first_response_seconds" in wide[2] and "completion_tokens" in wide[2]
    assert sum("│ vllm " in x and "0.089" in x for x in wide) == 1  # not folded
    m = CliRunner().invoke(main, ["traces", "--vllm-model", "[bold]m[/]", str(OTLP / (
        "vllm-0.32-llm_request.pb"))], env={"COLUMNS": "80"})
    assert m.exit_code == 0 and "[bold]m[/]" in m.stdout  # a model name is not markup
