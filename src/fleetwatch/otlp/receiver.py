"""The sidecar's OTLP/HTTP trace receiver: ``POST /v1/traces`` on its own port.

Each accepted body (:mod:`fleetwatch.otlp.decode`: protobuf or JSON, gzip, bounded) is
answered ``200`` with an empty ``ExportTraceServiceResponse`` in the request's encoding,
then

1. forwarded unchanged — the same bytes, ``Content-Type`` and ``Content-Encoding`` — to
   ``traces.forward.url`` when configured (:class:`Forwarder`: at most ``max_in_flight``
   bodies in flight, more are dropped and counted);
2. joined into requests (:class:`~fleetwatch.traces.join.TraceJoiner`), whose latencies
   feed the trace histograms (:class:`~fleetwatch.traces.histograms.TraceHistograms`,
   overlaid on ``/metrics``) and the optional OTLP metrics export;
3. once settled (:class:`~fleetwatch.traces.concurrency.LoadEstimator`), judged against
   the ``sli.source: traces`` SLOs (:func:`fleetwatch.traces.judge.judge`) and accounted by
   :meth:`fleetwatch.slo.engine.SLOEngine.add_events`.

A refused body gets the OTLP error response — a ``google.rpc.Status`` (code
``INVALID_ARGUMENT``, the reason in ``message``) in the request's encoding, HTTP 400, 413
or 415 — and ``fleetwatch_traces_refused_bodies_total{trace_reason}``; a handler never
raises. :meth:`TraceReceiver.tick` (every second) expires the join buffer, settles
waiting requests and forgets the models without a request for the SLO file's
``limits.forget_model_after`` (the engine's own no-data timer, 1 h without an engine):
their trace histograms and load estimator state go, as the engine's state for them does.

Before a span touches any of that it is judged (:mod:`fleetwatch.otlp.admit`: times
within a bounded skew of the sidecar's clock, finite bounded durations, bounded attribute
and model-name lengths); a refused span is dropped and counted in
``fleetwatch_traces_refused_spans_total{trace_reason}``, and so is a request of a model
beyond ``traces.max_models`` distinct models (``too_many_models``). Every SLO event is
booked at the sidecar's clock, never at a time a span gives.

HTTP bounds: with ``traces.auth.bearer_token_file`` a request without ``Authorization:
Bearer <token>`` (compared in constant time) is answered 401 (``trace_reason=
"unauthorized"``); with ``traces.auth.tls`` the listener speaks TLS and requires a client
certificate signed by ``client_ca_file``. The sidecar passes its connection guard
(:class:`ListenGuard`: ``traces.max_connections``, ``traces.header_timeout_seconds``), and
a body not sent within ``traces.read_timeout_seconds`` is answered 408
(``read_timeout``). A body is processed :data:`CHUNK_SPANS` spans at a time, the event
loop getting a turn in between (:meth:`TraceReceiver.ingest_async`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetwatch.exporters.assemble import Part
from fleetwatch.labels.schema import METRICS_BY_NAME
from fleetwatch.otlp.admit import SPAN_REASONS, SpanBounds, refusal
from fleetwatch.otlp.auth import BearerAuth, ListenGuard, read_token, server_tls, status_body
from fleetwatch.otlp.config import Forward, TracesConfig
from fleetwatch.otlp.decode import REASONS, Limits, OTLPDecodeError, decode_request, iter_spans
from fleetwatch.slo.account.ledger import Selection
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import EngineLimits
from fleetwatch.slo.state import ModelKey, TraceEvent
from fleetwatch.traces.concurrency import LoadEstimator
from fleetwatch.traces.facts import RequestFacts
from fleetwatch.traces.histograms import TraceHistograms, overlay
from fleetwatch.traces.join import TraceJoiner
from fleetwatch.traces.judge import judge

log = logging.getLogger(__name__)

DROP_REASONS = ("evicted", "expired", "late", "span_overflow")
#: Why a body was refused: the decoder's reasons and the HTTP layer's.
BODY_REASONS = (*REASONS, "unauthorized", "read_timeout")
#: Spans judged and joined between two turns of the event loop (a few ms of work).
CHUNK_SPANS = 256
#: Why the receiver's connection guard closed a connection.
CLOSE_REASONS = ("max_connections", "header_timeout")

class Forwarder:
    """Re-posts bodies unchanged to a downstream OTLP endpoint (see module docstring)."""

    def __init__(self, cfg: Forward) -> None:
        self.cfg = cfg
        self.results: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None

    def submit(self, body: bytes, headers: dict[str, str]) -> None:
        """Schedule one body (dropped, and counted, beyond ``max_in_flight``)."""
        if len(self._tasks) >= self.cfg.max_in_flight:
            self.results["dropped"] += 1
            return
        task = asyncio.get_running_loop().create_task(self._post(body, headers))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, body: bytes, headers: dict[str, str]) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.cfg.timeout_seconds))
        try:
            async with self._session.post(str(self.cfg.url), data=body,
                                          headers={**self.cfg.headers, **headers}) as resp:
                await resp.read()
                self.results["ok" if resp.status < 300 else "error"] += 1
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            log.debug("forwarding to %s failed: %s", self.cfg.url, exc)
            self.results["error"] += 1

    async def close(self) -> None:
        """Wait for the bodies in flight (bounded by their timeout), close the session."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()


class TraceReceiver:
    """Spans in, per-request facts, histograms and SLO events out (module docstring).

    ``engine``: the SLO engine whose SLOs judge the requests (None: no SLOs, histograms
    only); ``sink`` receives the judged events (default ``engine.add_events``; the sidecar
    passes its engine worker's, so the engine is only touched by its thread);
    ``on_facts``: called with every batch of joined requests (the OTLP metrics export);
    ``max_label_value_length``: the bound of a model name (the sidecar passes its
    ``scrape.max_label_value_length``, the bound of scraped label values). Raises
    :class:`~fleetwatch.otlp.auth.OTLPAuthError` when ``traces.auth``'s token or TLS
    files cannot be loaded.
    """

    def __init__(self, cfg: TracesConfig, engine: SLOEngine | None = None,
                 on_facts: Callable[[list[RequestFacts]], None] | None = None,
                 sink: Callable[[list[TraceEvent]], None] | None = None,
                 max_label_value_length: int = 4096) -> None:
        self.cfg = cfg
        self.limits = Limits(cfg.max_body_bytes, cfg.max_spans_per_body)
        self.bounds = SpanBounds(cfg.max_future_skew_seconds, cfg.max_past_skew_seconds,
                                 cfg.max_duration_seconds, cfg.max_attribute_length,
                                 max_label_value_length)
        self.joiner = TraceJoiner(cfg.vllm_model, cfg.vllm_model_version,
                                  max_traces=cfg.buffer_traces,
                                  timeout_s=cfg.join_timeout_seconds,
                                  max_spans=cfg.buffer_spans,
                                  caller_wait_s=cfg.caller_wait_seconds)
        self.estimator = LoadEstimator(settle_s=cfg.settle_seconds)
        self.histograms = TraceHistograms()
        self.engine = engine
        self.on_facts = on_facts
        self.forwarder = Forwarder(cfg.forward) if cfg.forward is not None else None
        self.refused: Counter[str] = Counter()
        #: spans (requests for too_many_models) refused before touching state, by reason
        self.refused_spans: Counter[str] = Counter()
        #: per model from spans: when its last request came (sidecar clock), ≤ max_models
        self.models: dict[ModelKey, float] = {}
        self.guard: ListenGuard | None = None
        self.auth = BearerAuth(read_token(cfg.auth), self.refused)
        self.tls = server_tls(cfg.auth)
        self._selects = Selection(engine.registry) if engine is not None else None
        self._sink = sink or (engine.add_events if engine is not None else None)
        limits = engine.spec.limits if engine is not None else EngineLimits()
        self._forget_after = limits.forget_model_after

    def ingest(self, body: bytes, content_type: str, content_encoding: str = "",
               now: float | None = None) -> int:
        """Decode and process one body; return its span count. Raises
        :class:`~fleetwatch.otlp.decode.OTLPDecodeError` (counted) for a refused one."""
        return max(self._steps(body, content_type, content_encoding, now))

    async def ingest_async(self, body: bytes, content_type: str,
                           content_encoding: str = "") -> int:
        """:meth:`ingest` giving the event loop a turn after every :data:`CHUNK_SPANS`
        spans: a body of thousands of spans never holds ``/healthz`` for its whole time."""
        n = 0
        for step in self._steps(body, content_type, content_encoding, None):
            n = step
            await asyncio.sleep(0)
        return n

    def _steps(self, body: bytes, content_type: str, content_encoding: str,
               now: float | None) -> Iterator[int]:
        """Process one body :data:`CHUNK_SPANS` spans at a time — each span judged
        (:func:`~fleetwatch.otlp.admit.refusal`, at one time for the body), then joined
        and processed — yielding the spans seen after each chunk."""
        try:
            req = decode_request(body, content_type, content_encoding, self.limits)
        except OTLPDecodeError as exc:
            self.refused[exc.reason] += 1
            raise
        t = time.time() if now is None else now
        n, kept = 0, []
        for span in iter_spans(req):
            n += 1
            why = refusal(span, t, self.bounds)
            if why is None:
                kept.append(span)
            else:
                self.refused_spans[why] += 1
            if n % CHUNK_SPANS == 0:
                self._process(self.joiner.add(kept, t), t)
                kept = []
                yield n
        self._process(self.joiner.add(kept, t), t)
        yield n

    def tick(self, now: float | None = None) -> None:
        """Expire the join buffer, settle waiting requests and forget gone models (call
        every second; see module docstring)."""
        t = time.time() if now is None else now
        self._process(self.joiner.expire(t), t)
        horizon = t - self._forget_after
        self.histograms.forget(horizon)
        self.estimator.forget(horizon)
        for mk in [mk for mk, seen in self.models.items() if seen < horizon]:
            del self.models[mk]

    def flush(self, now: float | None = None) -> None:
        """Emit and settle everything pending (shutdown, tests)."""
        t = time.time() if now is None else now
        self._process(self.joiner.flush(), t)
        self._judge(self.estimator.flush(), t)

    def _admit(self, facts: list[RequestFacts], now: float) -> list[RequestFacts]:
        """The requests of known models, and of new ones while fewer than
        ``traces.max_models`` are kept (the others counted ``too_many_models``)."""
        out = []
        for f in facts:
            mk = ModelKey(f.model, f.model_version, f.backend)
            if mk not in self.models and len(self.models) >= self.cfg.max_models:
                self.refused_spans["too_many_models"] += 1
                continue
            self.models[mk] = now
            out.append(f)
        return out

    def _process(self, facts: list[RequestFacts], now: float) -> None:
        facts = self._admit(facts, now)
        if facts:
            self.histograms.add(facts, now)
            if self.on_facts is not None:
                self.on_facts(facts)
        self._judge(self.estimator.add(facts, now), now)

    def _judge(self, settled: list[RequestFacts], now: float) -> None:
        if settled and self.engine is not None and self._selects is not None \
                and self._sink is not None:
            self._sink(judge(settled, self.engine.spec, self._selects, now))

    def normalized(self, part: Part) -> Part:
        """The normalized families with the trace buckets overlaid (``/metrics``)."""
        return overlay(part, self.histograms)

    # -- HTTP ----------------------------------------------------------------------------
    async def _read(self, request: web.Request) -> bytes:
        too_large = OTLPDecodeError("too_large",
                                    f"body exceeds {self.limits.max_body_bytes} bytes", 413)
        if (request.content_length or 0) > self.limits.max_body_bytes:
            self.refused[too_large.reason] += 1
            raise too_large
        try:
            return await asyncio.wait_for(request.read(), self.cfg.read_timeout_seconds)
        except web.HTTPRequestEntityTooLarge:
            self.refused[too_large.reason] += 1
            raise too_large from None
        except asyncio.TimeoutError:
            self.refused["read_timeout"] += 1
            raise OTLPDecodeError("read_timeout", "body not sent within "
                                  f"{self.cfg.read_timeout_seconds:g} s", 408) from None

    async def handle(self, request: web.Request) -> web.Response:
        """``POST /v1/traces``."""
        ctype = request.headers.get("Content-Type", "")
        encoding = request.headers.get("Content-Encoding", "")
        is_json = ctype.split(";")[0].strip().lower() == "application/json"
        reply_type = "application/json" if is_json else "application/x-protobuf"
        try:
            body = await self._read(request)
            await self.ingest_async(body, ctype, encoding)
        except OTLPDecodeError as exc:
            return web.Response(status=exc.status, body=status_body(str(exc), is_json),
                                content_type=reply_type)
        if self.forwarder is not None:
            fwd = {"Content-Type": ctype}
            if encoding:
                fwd["Content-Encoding"] = encoding
            self.forwarder.submit(body, fwd)
        return web.Response(body=b"{}" if is_json else b"", content_type=reply_type)


def _family(name: str) -> CounterMetricFamily | GaugeMetricFamily:
    mdef = METRICS_BY_NAME[name]
    if mdef.type == "counter":
        return CounterMetricFamily(name[:-6], mdef.exposition_help, labels=list(mdef.labels))
    return GaugeMetricFamily(name, mdef.exposition_help, labels=list(mdef.labels))


class ReceiverCollector(Collector):
    """``fleetwatch_traces_*`` of a :class:`TraceReceiver` (every reason from 0)."""

    def __init__(self, receiver: TraceReceiver) -> None:
        self.r = receiver

    def collect(self) -> Iterator[Metric]:
        st = self.r.joiner.stats
        spans = _family("fleetwatch_traces_spans_total")
        refused_spans_n = sum(n for r, n in self.r.refused_spans.items()
                              if r != "too_many_models")  # that one counts requests
        spans.add_metric([], st.spans + refused_spans_n)
        requests = _family("fleetwatch_traces_requests_total")
        requests.add_metric([], st.requests)
        refused = _family("fleetwatch_traces_refused_bodies_total")
        for reason in BODY_REASONS:
            refused.add_metric([reason], self.r.refused[reason])
        refused_spans = _family("fleetwatch_traces_refused_spans_total")
        for reason in SPAN_REASONS:
            refused_spans.add_metric([reason], self.r.refused_spans[reason])
        models = _family("fleetwatch_traces_models")
        models.add_metric([], len(self.r.models))
        dropped = _family("fleetwatch_traces_dropped_total")
        for reason in DROP_REASONS:
            dropped.add_metric([reason], getattr(st, reason))
        pending = _family("fleetwatch_traces_pending_traces")
        pending.add_metric([], self.r.joiner.pending)
        yield from (spans, requests, refused, refused_spans, dropped, pending, models)
        if self.r.guard is not None:
            closed = _family("fleetwatch_traces_connections_closed_total")
            for reason in CLOSE_REASONS:
                closed.add_metric([reason], self.r.guard.closed[reason])
            yield closed
        if self.r.forwarder is not None:
            fwd = _family("fleetwatch_traces_forwarded_bodies_total")
            for result in ("ok", "error", "dropped"):
                fwd.add_metric([result], self.r.forwarder.results[result])
            yield fwd


def receiver_metrics(receiver: TraceReceiver) -> Callable[[], bytes]:
    """The receiver's ``fleetwatch_traces_*`` exposition (text format) for ``/metrics``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReceiverCollector(receiver))
    return lambda: generate_latest(registry)


def receiver_runner(receiver: TraceReceiver, guard: ListenGuard | None = None
                    ) -> web.AppRunner:
    """The receiver's own application (``POST /v1/traces``) in a runner: aiohttp's body
    limit is the receiver's (an oversized body is refused while being read) and bodies are
    not decompressed by aiohttp — the receiver gunzips within its limit, and forwards the
    bytes as they came. ``guard``'s middleware goes first (it times the headers), then
    the bearer-token check."""
    middlewares = [guard.middleware] if guard is not None else []
    app = web.Application(client_max_size=receiver.limits.max_body_bytes,
                          middlewares=[*middlewares, receiver.auth.middleware])
    app.router.add_post("/v1/traces", receiver.handle)
    return web.AppRunner(app, access_log=None, auto_decompress=False)


async def run_receiver(receiver: TraceReceiver, stop: asyncio.Event,
                       on_ready: Callable[[int], None] | None = None,
                       guard: ListenGuard | None = None) -> None:
    """Serve the receiver on ``traces.listen`` until ``stop`` (through ``guard`` when
    given, with TLS when ``traces.auth.tls`` is set); ticks every second."""
    tls = receiver.tls
    receiver.guard = guard
    runner = receiver_runner(receiver, guard)
    await runner.setup()
    host, port = receiver.cfg.listen.address, receiver.cfg.listen.port
    site = (guard.site(runner, host, port, tls) if guard is not None
            else web.TCPSite(runner, host, port, ssl_context=tls))
    await site.start()
    port = runner.addresses[0][1] if runner.addresses else port
    log.info("OTLP trace receiver on %s://%s:%d/v1/traces%s", "https" if tls else "http",
             host, port, " (bearer token required)" if receiver.cfg.auth
             and receiver.cfg.auth.bearer_token_file else "")
    if on_ready is not None:
        on_ready(port)
    try:
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            receiver.tick()
    finally:
        await runner.cleanup()
        if receiver.forwarder is not None:
            await receiver.forwarder.close()
