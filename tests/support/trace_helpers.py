"""Test helpers for the OTLP trace receiver: synthetic Triton/vLLM export bodies, the
receiver on a thread, and a downstream OTLP collector *test double* (no OpenTelemetry
Collector binary is obtainable here)."""

from __future__ import annotations

import asyncio
import copy
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric as PbMetric
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from fleetwatch.otlp.receiver import TraceReceiver, receiver_runner

OTLP = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
MS = 1_000_000  # ns
#: The epoch of the hand-built spans (Unix seconds): pass ``now=T0 + …`` to the receiver,
#: whose clock bounds a span's times.
T0 = 1_700_000_000.0


def triton_request(trace: int, model: str = "ranker", version: int = 1, start_ms: int = 0,
                   e2e_ms: int = 10, queue_ms: int = 1, sends: int = 1) -> list[PbSpan]:
    """The three spans Triton 2.51 exports for one request (times in ms from 0)."""
    tid = trace.to_bytes(16, "big")
    root, mspan, comp = (bytes([i]) + trace.to_bytes(7, "big") for i in (1, 2, 3))
    t0 = 1_700_000_000_000 * MS + start_ms * MS
    end = t0 + e2e_ms * MS
    r = PbSpan(trace_id=tid, span_id=root, name="InferRequest", start_time_unix_nano=t0,
               end_time_unix_nano=end)
    for i in range(sends):
        r.events.add(name="GRPC_SEND_START", time_unix_nano=t0 + (i + 1) * MS)
        r.events.add(name="GRPC_SEND_END", time_unix_nano=t0 + (i + 1) * MS + 1000)
    m = PbSpan(trace_id=tid, span_id=mspan, parent_span_id=root, name=model,
               start_time_unix_nano=t0, end_time_unix_nano=end)
    m.attributes.add(key="triton.model_name").value.string_value = model
    m.attributes.add(key="triton.model_version").value.int_value = version
    for name, t in (("REQUEST_START", t0), ("QUEUE_START", t0), ("REQUEST_END", end)):
        m.events.add(name=name, time_unix_nano=t)
    c = PbSpan(trace_id=tid, span_id=comp, parent_span_id=mspan, name="compute",
               start_time_unix_nano=t0 + queue_ms * MS, end_time_unix_nano=end)
    c.events.add(name="COMPUTE_START", time_unix_nano=t0 + queue_ms * MS)
    c.events.add(name="COMPUTE_END", time_unix_nano=end)
    return [c, m, r]


def vllm_request(trace: int, ttft: float, e2e: float, tokens: int, start_s: float = 0.0,
                 decode: float | None = None) -> PbSpan:
    """One vLLM 0.32 ``llm_request`` span."""
    s = PbSpan(trace_id=trace.to_bytes(16, "big"), span_id=trace.to_bytes(8, "big"),
               name="llm_request", kind=PbSpan.SPAN_KIND_SERVER,
               start_time_unix_nano=int((1_700_000_000 + start_s) * 1e9),
               end_time_unix_nano=int((1_700_000_000 + start_s + e2e) * 1e9))
    for key, v in (("gen_ai.latency.time_to_first_token", ttft), ("gen_ai.latency.e2e", e2e),
                   ("gen_ai.latency.time_in_queue", 0.0),
                   ("gen_ai.latency.time_in_model_decode",
                    e2e - ttft if decode is None else decode)):
        s.attributes.add(key=key).value.double_value = v
    s.attributes.add(key="gen_ai.usage.completion_tokens").value.int_value = tokens
    s.attributes.add(key="gen_ai.usage.prompt_tokens").value.int_value = 3
    return s


def body(spans: list[PbSpan]) -> bytes:
    """One protobuf ExportTraceServiceRequest holding ``spans``."""
    req = ExportTraceServiceRequest()
    req.resource_spans.add().scope_spans.add().spans.extend(spans)
    return req.SerializeToString()


class ReceiverThread:
    """A :class:`TraceReceiver`'s ``/v1/traces`` app served on a free loopback port from
    its own thread and event loop (``url``); ``call(fn)`` runs ``fn()`` on that loop."""

    def __init__(self, receiver: TraceReceiver) -> None:
        self.receiver = receiver
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        from aiohttp import web

        asyncio.set_event_loop(self.loop)
        self.runner = receiver_runner(self.receiver)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self.runner.addresses[0][1]
        self._ready.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def call(self, fn):  # type: ignore[no-untyped-def]
        async def run():  # type: ignore[no-untyped-def]
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def __enter__(self) -> ReceiverThread:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self.receiver.forwarder is not None:
                await self.receiver.forwarder.close()
            await self.runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class DownstreamCollectorDouble:
    """A **test double** of the platform's OpenTelemetry Collector: an HTTP server on a
    free loopback port that answers 200 to any ``POST`` (``/v1/traces`` for forwarded
    spans, ``/v1/metrics`` for the metrics export) and records each body with its headers
    (``received``)."""

    def __init__(self) -> None:
        received: list[tuple[bytes, dict[str, str]]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append((data, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def __enter__(self) -> DownstreamCollectorDouble:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def chunks(items: list[PbSpan], n: int) -> Iterator[list[PbSpan]]:
    """``items`` in lists of ``n``."""
    for i in range(0, len(items), n):
        yield items[i:i + n]


def decode_metrics(payload: bytes) -> dict[str, list[tuple[str, PbMetric]]]:
    """One OTLP metrics export body, decoded with opentelemetry-proto: metric name →
    ``[(scope name, metric), …]``."""
    req = ExportMetricsServiceRequest()
    req.ParseFromString(payload)
    out: dict[str, list[tuple[str, PbMetric]]] = {}
    for rm in req.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).append((sm.scope.name, m))
    return out


def points(m: PbMetric) -> list:
    """The data points of a metric, whatever its type."""
    return list(getattr(m, m.WhichOneof("data")).data_points)


def attrs(point) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A data point's attributes as strings."""
    return {kv.key: kv.value.string_value for kv in point.attributes}


def convention_names() -> tuple[set[str], set[str]]:
    """``(metric names, attribute names)`` the semantic conventions define, read from the
    ``opentelemetry-semantic-conventions`` package (stable and incubating modules)."""
    import importlib
    import pkgutil

    found: dict[str, set[str]] = {"metrics": set(), "attributes": set()}
    for kind, found_set in found.items():
        for pkg in (f"opentelemetry.semconv.{kind}", f"opentelemetry.semconv._incubating.{kind}"):
            for info in pkgutil.iter_modules(importlib.import_module(pkg).__path__, pkg + "."):
                mod = importlib.import_module(info.name)
                found_set |= {v for k, v in vars(mod).items() if isinstance(v, str)
                              and k.isupper()}
    return found["metrics"], found["attributes"]


def check_names(metrics: dict[str, list[tuple[str, PbMetric]]], allowed_genai: set[str],
                ) -> None:
    """Fail on a metric or attribute name that is neither fleetwatch's own
    (``modelserver.*``) nor defined by the conventions as such (a metric name among their
    metrics, an attribute among their attributes), and on a ``gen_ai.*`` one outside
    ``allowed_genai`` (the allow-list of :mod:`fleetwatch.otlp.semconv`)."""
    metric_names, attribute_names = convention_names()
    keys = {k for ms in metrics.values() for _, m in ms for p in points(m) for k in attrs(p)}
    for names, defined in ((set(metrics), metric_names), (keys, attribute_names)):
        for name in sorted(names):
            if name.startswith("modelserver."):
                continue
            assert name in defined, f"{name}: not defined by the semantic conventions"
            assert not name.startswith("gen_ai.") or name in allowed_genai, name


def redate_json(otlp_json: bytes, now: float) -> bytes:
    """An OTLP/JSON body with every ``*UnixNano`` time shifted by one offset so that its
    latest time is ``now`` (Unix seconds): a captured body as if sent now (the receiver
    refuses spans beyond its clock's skew bounds)."""
    data = json.loads(otlp_json)
    times: list[int] = []

    def walk(node: object, shift: int) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k.endswith("UnixNano") and isinstance(v, str | int):
                    times.append(int(v))
                    node[k] = str(int(v) + shift)
                else:
                    walk(v, shift)
        elif isinstance(node, list):
            for v in node:
                walk(v, shift)

    walk(copy.deepcopy(data), 0)
    walk(data, int(now * 1e9) - max(times))
    return json.dumps(data).encode()
