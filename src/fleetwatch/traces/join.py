"""Joining the spans of one request: a bounded buffer keyed by trace id, with a timeout.

Triton exports a request's three spans (``compute``, the model span, ``InferRequest``)
as each ends, batched by its span processor, so they may arrive in different export
bodies and in any order. :class:`TraceJoiner` holds a Triton trace until it is
**complete** — the outermost model span, its parent (``InferRequest``) and its
``compute`` child have all arrived — and then emits its
:class:`~fleetwatch.traces.facts.RequestFacts`. A vLLM ``llm_request`` span is a whole
request: emitted at once when it has no parent span (no caller propagated a trace
context), else when its caller's span names its model or after a short wait
(:mod:`.callers`, which keeps the other spans that name a model); other spans (vLLM's
start-up spans) are ignored.

Bounds (counted in :class:`JoinStats`):

* at most ``max_traces`` pending traces (default 10 000): a new trace beyond that evicts
  the oldest pending one (``evicted``) — spans that never complete cannot grow memory;
* a pending trace older than ``timeout_s`` (default 10 s, measured from its first span)
  is emitted as it is when it has a model span with REQUEST_START/REQUEST_END
  (``partial``; queue or first-response time may be missing) and dropped otherwise
  (``expired``);
* at most ``max_spans_per_trace`` spans per trace (default 64; ``span_overflow``) and
  ``max_spans`` spans in all pending traces (default 40 000: the oldest pending traces
  are evicted for a new span, ``evicted``); a pending span keeps only the attributes its
  facts read (:data:`~fleetwatch.traces.facts.TRITON_ATTRIBUTES`), so its size is
  bounded by the receiver's attribute bound;
* a span of a trace already emitted (remembered for the last ``max_traces`` traces) is
  ``late`` and not joined again.

The vLLM requests waiting for their caller's span are bounded alike, by the same
settings, in their own buffer (:class:`~fleetwatch.traces.callers.CallerBuffer`, waiting
at most ``caller_wait_s``); its ``evicted`` and ``span_overflow`` add to these counters.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field

from fleetwatch.traces.callers import CallerBuffer
from fleetwatch.traces.facts import (
    TRITON_ATTRIBUTES,
    TRITON_ROOT,
    VLLM_SPAN,
    RequestFacts,
    is_triton_model_span,
    triton_facts,
    vllm_facts,
)
from fleetwatch.traces.spans import Span


@dataclass
class JoinStats:
    """Counters since start (spans or traces, as named); ``caller_named`` and
    ``caller_unnamed``: vLLM requests whose model a caller's span named, and those that
    waited for one in vain (:mod:`.callers`)."""

    spans: int = 0
    requests: int = 0
    ignored: int = 0
    partial: int = 0
    expired: int = 0
    evicted: int = 0
    late: int = 0
    span_overflow: int = 0
    caller_named: int = 0
    caller_unnamed: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return dict(self.__dict__)


@dataclass
class _Pending:
    first_seen: float
    spans: list[Span] = field(default_factory=list)


def _is_triton(span: Span) -> bool:
    return (is_triton_model_span(span) or span.name in (TRITON_ROOT, "compute")
            or span.scope == "triton-server")


def _complete(spans: list[Span]) -> bool:
    models = [s for s in spans if is_triton_model_span(s)]
    ids = {s.span_id for s in models}
    have = {s.span_id for s in spans}
    for top in models:
        if top.parent_span_id not in ids:
            has_compute = any(s.name == "compute" and s.parent_span_id == top.span_id
                              for s in spans)
            return has_compute and top.parent_span_id in have
    return False


class TraceJoiner:
    """Joins spans into per-request facts (see module docstring). ``vllm_model`` /
    ``vllm_model_version`` name the model a vLLM span belongs to when no caller's span
    names it (:mod:`.callers`, waiting at most ``caller_wait_s``). Times (``now``) are
    Unix seconds of the caller's clock."""

    def __init__(self, vllm_model: str = "vllm", vllm_model_version: str = "", *,
                 max_traces: int = 10_000, timeout_s: float = 10.0,
                 max_spans_per_trace: int = 64, max_spans: int = 40_000,
                 caller_wait_s: float = 6.0) -> None:
        self.vllm_model = vllm_model
        self.vllm_model_version = vllm_model_version
        self.max_traces = max_traces
        self.timeout_s = timeout_s
        self.max_spans_per_trace = max_spans_per_trace
        self.max_spans = max_spans
        self._held = 0  # spans in pending traces
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()
        self.callers = CallerBuffer(wait_s=caller_wait_s, max_traces=max_traces,
                                    max_spans_per_trace=max_spans_per_trace,
                                    max_spans=max_spans)
        self._stats = JoinStats()

    @property
    def stats(self) -> JoinStats:
        """The counters, the caller buffer's included."""
        c = self.callers.stats
        st = dataclasses.replace(self._stats)
        st.evicted += c.evicted
        st.span_overflow += c.span_overflow
        st.caller_named, st.caller_unnamed = c.named, c.unnamed
        return st

    @property
    def pending(self) -> int:
        """Traces waiting for more spans: Triton traces (≤ ``max_traces``) and traces of
        vLLM requests waiting for their caller's span (≤ ``max_traces``)."""
        return len(self._pending) + self.callers.pending

    def add(self, spans: list[Span], now: float) -> list[RequestFacts]:
        """Take the spans of one export body; return the requests they complete (and
        those expired by ``now``)."""
        out: list[RequestFacts] = []
        vllm: list[RequestFacts] = []
        touched: list[str] = []
        callers: list[str] = []
        st = self._stats
        for span in spans:
            st.spans += 1
            if span.name == VLLM_SPAN:
                f = vllm_facts(span, self.vllm_model, self.vllm_model_version)
                if f is None:
                    st.ignored += 1
                else:
                    self.callers.add_request(span, f, now, vllm)
                    callers.append(span.trace_id)
            elif _is_triton(span):
                if self._add_triton(span, now):
                    touched.append(span.trace_id)
            elif self.callers.add_span(span, now, vllm):
                callers.append(span.trace_id)
            else:
                st.ignored += 1
        self.callers.settle(callers, vllm)
        for tid in dict.fromkeys(touched):
            p = self._pending.get(tid)
            if p is not None and _complete(p.spans):
                self._emit(tid, out)
        out.extend(self._count(vllm))
        out.extend(self.expire(now))
        return out

    def _count(self, vllm: list[RequestFacts]) -> list[RequestFacts]:
        """``vllm``, the vLLM requests the caller buffer emitted, counted."""
        self._stats.requests += len(vllm)
        return vllm

    def _add_triton(self, span: Span, now: float) -> bool:
        """Hold a Triton span in its pending trace; False when it is ``late`` or its
        trace is full (``span_overflow``)."""
        tid = span.trace_id
        if tid in self._done:
            self._stats.late += 1
            return False
        p = self._pending.get(tid)
        if p is not None and len(p.spans) >= self.max_spans_per_trace:
            self._stats.span_overflow += 1
            return False
        self._make_room(tid)
        p = self._pending.get(tid)
        if p is None:
            p = self._pending[tid] = _Pending(now)
        p.spans.append(Span(span.trace_id, span.span_id, span.parent_span_id, span.name,
                            span.kind, span.start_ns, span.end_ns, {
                                k: span.attributes[k] for k in TRITON_ATTRIBUTES
                                if k in span.attributes}, span.events))
        self._held += 1
        return True

    def _make_room(self, tid: str) -> None:
        """Evict the oldest pending traces (other than ``tid``) until one more span, and
        one more trace if ``tid`` is new, fit the bounds."""
        new = tid not in self._pending
        while self._pending and (self._held >= self.max_spans
                                 or (new and len(self._pending) >= self.max_traces)):
            oldest = next(iter(self._pending))
            if oldest == tid:  # the only pending trace is this one: it may not grow
                break
            self._held -= len(self._pending.pop(oldest).spans)
            self._stats.evicted += 1

    def _emit(self, tid: str, out: list[RequestFacts], partial: bool = False) -> None:
        p = self._pending.pop(tid)
        self._held -= len(p.spans)
        self._done[tid] = None
        if len(self._done) > self.max_traces:
            self._done.popitem(last=False)
        f = triton_facts(p.spans)
        if f is None:
            self._stats.expired += 1
            return
        if partial:
            self._stats.partial += 1
        self._stats.requests += 1
        out.append(f)

    def expire(self, now: float) -> list[RequestFacts]:
        """Emit or drop the pending traces older than ``timeout_s`` and emit the vLLM
        requests that waited ``caller_wait_s`` for their caller's span (see module
        docstring); the requests emitted are returned."""
        out: list[RequestFacts] = []
        while self._pending:
            tid, p = next(iter(self._pending.items()))
            if now - p.first_seen < self.timeout_s:
                break
            self._emit(tid, out, partial=True)
        out.extend(self._count(self.callers.expire(now)))
        return out

    def flush(self) -> list[RequestFacts]:
        """Emit every pending trace as if it had timed out, and every vLLM request still
        waiting for its caller's span (offline reading)."""
        out: list[RequestFacts] = []
        for tid in list(self._pending):
            self._emit(tid, out, partial=True)
        out.extend(self._count(self.callers.flush()))
        return out
