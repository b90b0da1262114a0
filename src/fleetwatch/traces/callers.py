"""Naming a vLLM request's model from its caller's span in the same trace.

vLLM 0.32's ``llm_request`` span names neither the model nor the LoRA adapter a request
asked for (``vllm/v1/engine/output_processor.py`` sets no ``gen_ai.request.model`` or
``gen_ai.response.model``), but it is the child of the trace context the request carried
(W3C ``traceparent``, read by vLLM's OpenAI server). A gateway or client instrumented by the
OpenTelemetry GenAI semantic conventions makes a CLIENT span ``{gen_ai.operation.name}
{gen_ai.request.model}`` around the call and propagates its context, so the vLLM span's
**nearest ancestor that names a model** (``gen_ai.response.model``, else
``gen_ai.request.model``: :func:`~fleetwatch.traces.facts.genai_model`) names the served
model or adapter. Between the two there may be spans naming none (an HTTP client span of
the same caller): they are followed by their parent.

The rule, one path for every vLLM span:

* a span without a parent (no caller propagated a context) or one naming its own model is
  emitted at once — the first under the configured ``vllm_model``;
* otherwise it **waits** in :class:`CallerBuffer` for its ancestors: it is emitted as soon
  as the chain of ancestors that arrived reaches a span naming a model (under that model)
  or a root naming none (under ``vllm_model``). The caller's span usually arrives after
  vLLM's (it ends later), in any export body and either order;
* a request still waiting ``wait_s`` after its trace's first span here arrived (default
  6 s: the OpenTelemetry SDKs' batch span processors export every 5 s by default,
  ``OTEL_BSP_SCHEDULE_DELAY``) is emitted under ``vllm_model``, as it would be without
  callers.

Other spans are kept only when they name a model or their trace has a waiting request;
a kept span keeps only its ids and the model it names. Bounds (shared with the join
buffer's settings): at most ``max_traces`` traces, the oldest evicted for a new one, its
waiting requests emitted under ``vllm_model`` (nothing is lost but the caller's name);
at most ``max_spans_per_trace`` spans per trace (more are ``span_overflow``) and
``max_spans`` kept spans in all (the oldest traces evicted). A model name is as bounded
as any span's: the receiver refuses a span whose model attribute exceeds the label-value
bound (:mod:`fleetwatch.otlp.admit`), and requests of models beyond ``traces.max_models``.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

from fleetwatch.traces.facts import RequestFacts, genai_model
from fleetwatch.traces.spans import Span


class Link(NamedTuple):
    """A kept span of a trace: its parent's id and the model it names (``""``: none)."""

    parent_span_id: str
    model: str


class Waiting(NamedTuple):
    """A vLLM request waiting for its model: its span's parent id and its facts (under the
    configured ``vllm_model`` until named)."""

    parent_span_id: str
    facts: RequestFacts


@dataclass(slots=True)
class CallerStats:
    """Counters since start: vLLM requests ``named`` by an ancestor's span, emitted
    ``unnamed`` after waiting (a root naming none, the wait over or their trace evicted);
    traces ``evicted`` and spans refused by ``span_overflow``."""

    named: int = 0
    unnamed: int = 0
    evicted: int = 0
    span_overflow: int = 0


@dataclass(slots=True)
class _Trace:
    first_seen: float
    links: dict[str, Link] = field(default_factory=dict)
    waiting: list[Waiting] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.links) + len(self.waiting)


def resolve(links: dict[str, Link], parent_span_id: str) -> str | None:
    """The model named by the nearest ancestor of a span whose parent is
    ``parent_span_id``, following ``links``; ``""`` when the chain reaches a root (or a
    cycle) naming none; None while an ancestor has not arrived."""
    sid = parent_span_id
    for _ in range(len(links) + 1):
        link = links.get(sid)
        if link is None:
            return None
        if link.model:
            return link.model
        if not link.parent_span_id:
            return ""
        sid = link.parent_span_id
    return ""


class CallerBuffer:
    """vLLM requests waiting for the span that names their model (module docstring).
    Times are Unix seconds of the caller's clock."""

    def __init__(self, *, wait_s: float = 6.0, max_traces: int = 10_000,
                 max_spans_per_trace: int = 64, max_spans: int = 40_000) -> None:
        self.wait_s = wait_s
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_spans = max_spans
        self.stats = CallerStats()
        self._held = 0
        self._traces: OrderedDict[str, _Trace] = OrderedDict()

    @property
    def pending(self) -> int:
        """Traces kept (≤ ``max_traces``)."""
        return len(self._traces)

    @property
    def waiting(self) -> int:
        """vLLM requests waiting for their model."""
        return sum(len(t.waiting) for t in self._traces.values())

    def add_request(self, span: Span, facts: RequestFacts, now: float,
                    out: list[RequestFacts]) -> None:
        """Take a vLLM request's facts: appended to ``out`` at once when its span has no
        parent or names its own model, else kept until named (:meth:`settle`)."""
        if not span.parent_span_id or genai_model(span):
            out.append(facts)
            return
        t = self._room(span.trace_id, now, out)
        if t is None:  # its trace is full: emitted as it is rather than lost
            out.append(facts)
            self.stats.unnamed += 1
            return
        t.waiting.append(Waiting(span.parent_span_id, facts))
        self._held += 1

    def add_span(self, span: Span, now: float, out: list[RequestFacts]) -> bool:
        """Take another span: kept (True) when it names a model or its trace has a
        waiting request; False when it is of no use here."""
        model = genai_model(span)
        if not model and span.trace_id not in self._traces:
            return False
        t = self._room(span.trace_id, now, out)
        if t is not None:
            self._held += span.span_id not in t.links  # a span sent twice is held once
            t.links[span.span_id] = Link(span.parent_span_id, model)
        return True

    def _room(self, tid: str, now: float, out: list[RequestFacts]) -> _Trace | None:
        """The trace ``tid``, made room for one more span (None: the trace is full,
        counted ``span_overflow``); evicted traces' requests go to ``out``."""
        t = self._traces.get(tid)
        if t is not None and t.size >= self.max_spans_per_trace:
            self.stats.span_overflow += 1
            return None
        while self._traces and (self._held >= self.max_spans
                                or (t is None and len(self._traces) >= self.max_traces)):
            oldest = next(iter(self._traces))
            if oldest == tid:  # the only trace kept is this one: it may not grow
                self.stats.span_overflow += 1
                return None
            self._release(oldest, out)
            self.stats.evicted += 1
        if t is None:
            t = self._traces[tid] = _Trace(now)
        return t

    def _release(self, tid: str, out: list[RequestFacts]) -> None:
        t = self._traces.pop(tid)
        self._held -= t.size
        out.extend(w.facts for w in t.waiting)
        self.stats.unnamed += len(t.waiting)

    def settle(self, tids: list[str], out: list[RequestFacts]) -> None:
        """Emit to ``out`` the waiting requests of traces ``tids`` whose model is now
        known (:func:`resolve`): under the ancestor's model, or under ``vllm_model``
        when their chain ended at a root naming none."""
        for tid in dict.fromkeys(tids):
            t = self._traces.get(tid)
            if t is None or not t.waiting:
                continue
            still = []
            for w in t.waiting:
                model = resolve(t.links, w.parent_span_id)
                if model is None:
                    still.append(w)
                elif model:
                    out.append(dataclasses.replace(w.facts, model=model))
                    self.stats.named += 1
                else:
                    out.append(w.facts)
                    self.stats.unnamed += 1
            self._held -= len(t.waiting) - len(still)
            t.waiting = still

    def expire(self, now: float) -> list[RequestFacts]:
        """Forget the traces older than ``wait_s``, emitting their waiting requests under
        ``vllm_model``."""
        out: list[RequestFacts] = []
        while self._traces:
            tid, t = next(iter(self._traces.items()))
            if now - t.first_seen < self.wait_s:
                break
            self._release(tid, out)
        return out

    def flush(self) -> list[RequestFacts]:
        """Emit every waiting request as if the wait were over (offline reading)."""
        out: list[RequestFacts] = []
        for tid in list(self._traces):
            self._release(tid, out)
        return out
