"""Per-request facts from the spans of one request (seconds, tokens).

**Triton** (2.51, ``--trace-config=mode=opentelemetry``, level ``TIMESTAMPS``): a request
is an ``InferRequest`` span (protocol events), a span named after the model (attributes
``triton.model_name``, ``triton.model_version``; events ``REQUEST_START``,
``QUEUE_START``, ``REQUEST_END``) and a ``compute`` span (``COMPUTE_START``,
``COMPUTE_INPUT_END``, ``COMPUTE_OUTPUT_START``, ``COMPUTE_END``). Then

* ``e2e_seconds`` = REQUEST_END − REQUEST_START of the model span: the clock of Triton's
  own ``nv_inference_request_duration_us`` (the sum over requests equals its delta);
* ``queue_seconds`` = COMPUTE_START − QUEUE_START (``nv_inference_queue_duration_us``);
* ``compute_seconds`` = COMPUTE_END − COMPUTE_START (input + infer + output);
* ``first_response_seconds`` (decoupled models: two or more ``*_SEND_START`` events on the
  ``InferRequest`` span, one per response plus the final flag) = the first
  ``GRPC_SEND_START``/``HTTP_SEND_START`` − REQUEST_START.

**vLLM** (0.32, ``--otlp-traces-endpoint``): one SERVER span ``llm_request`` per finished
request, started at the request's arrival, with ``gen_ai.latency.*`` attributes
(seconds): ``e2e_seconds`` = ``e2e``, ``ttft_seconds`` = ``time_to_first_token``,
``queue_seconds`` = ``time_in_queue``, ``prefill_seconds``/``decode_seconds`` =
``time_in_model_prefill``/``time_in_model_decode``, and ``tpot_seconds`` = decode ÷
(completion tokens − 1) — vLLM's own ``request_time_per_output_token`` (None for a
one-token answer, which has no decode; vLLM's histogram records 0 for it). The span has
no model name: the receiver is told which model the engine serves, or the caller's span
of the same trace names it (:mod:`.join`).

``occupancy`` is the part of the request's lifetime that counts as "in the system" for
the load estimator (:mod:`.concurrency`): Triton, REQUEST_START → REQUEST_END (what
Little's law over ``request_duration_us`` counts); vLLM, its running part, arrival +
queue → end (what ``vllm:num_requests_running`` counts).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from fleetwatch.traces.spans import AttrValue, Span

NS = 1e-9

#: The model span's and compute span's event names (Triton 2.51 TIMESTAMPS level).
REQUEST_START, QUEUE_START, REQUEST_END = "REQUEST_START", "QUEUE_START", "REQUEST_END"
COMPUTE_START, COMPUTE_END = "COMPUTE_START", "COMPUTE_END"
SEND_STARTS = ("GRPC_SEND_START", "HTTP_SEND_START")
#: vLLM's per-request span name.
VLLM_SPAN = "llm_request"
TRITON_ROOT = "InferRequest"
#: Attributes that name a request's model (Triton's model span; vLLM's, when present).
MODEL_ATTRIBUTES = ("triton.model_name", "gen_ai.response.model", "gen_ai.request.model")
#: The OpenTelemetry GenAI attributes that name an LLM request's model, in order of
#: precedence: the model that answered, then the model asked for.
GENAI_MODEL_ATTRIBUTES = ("gen_ai.response.model", "gen_ai.request.model")
#: The attributes of a Triton span that its facts read (what the join buffer keeps).
TRITON_ATTRIBUTES = ("triton.model_name", "triton.model_version", "triton.request_id")


@dataclass
class RequestFacts:
    """One finished request. Times in seconds; ``start_unix_s``/``end_unix_s`` Unix
    seconds; ``occupancy`` ``(start, end)`` Unix seconds (see module docstring);
    ``concurrency`` the mean requests of the model in the system during its lifetime
    (None until :mod:`.concurrency` estimated it)."""

    source: str  # "triton" | "vllm"
    model: str
    model_version: str
    trace_id: str
    start_unix_s: float
    end_unix_s: float
    e2e_seconds: float
    queue_seconds: float | None = None
    compute_seconds: float | None = None
    first_response_seconds: float | None = None
    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    request_id: str | None = None
    occupancy: tuple[float, float] = (0.0, 0.0)
    concurrency: float | None = None

    @property
    def backend(self) -> str:
        """The ``backend`` label of the normalized schema (``triton`` or ``vllm``)."""
        return self.source

    def metric(self, short: str) -> float | None:
        """The value an SLO's short latency name measures: ``ttft``, ``tpot``,
        ``request`` (e2e), ``queue``; None when this request has none."""
        return {"ttft": self.ttft_seconds, "tpot": self.tpot_seconds,
                "request": self.e2e_seconds, "queue": self.queue_seconds}.get(short)

    def to_json(self) -> str:
        """One JSON object (``fleetwatch traces --json``), without ``occupancy``."""
        d: dict[str, Any] = asdict(self)
        d.pop("occupancy")
        return json.dumps(d, sort_keys=True)


def _events(span: Span) -> dict[str, int]:
    """First time of each event name."""
    out: dict[str, int] = {}
    for name, t in span.events:
        out.setdefault(name, t)
    return out


def _secs(a: int | None, b: int | None) -> float | None:
    return (b - a) * NS if a is not None and b is not None and b >= a else None


def is_triton_model_span(span: Span) -> bool:
    """A Triton model span: it carries ``triton.model_name``."""
    return "triton.model_name" in span.attributes


def triton_facts(spans: list[Span]) -> RequestFacts | None:
    """Facts of one Triton request from its joined spans (None without a model span with
    REQUEST_START and REQUEST_END). With nested model spans (ensembles) the outermost —
    the one whose parent is not another model span — is the request's."""
    models = [s for s in spans if is_triton_model_span(s)]
    ids = {s.span_id for s in models}
    top = next((s for s in models if s.parent_span_id not in ids), None)
    if top is None:
        return None
    ev = _events(top)
    start, end = ev.get(REQUEST_START), ev.get(REQUEST_END)
    e2e = _secs(start, end)
    if start is None or end is None or e2e is None:
        return None
    compute = next((s for s in spans if s.name == "compute"
                    and s.parent_span_id == top.span_id), None)
    cev = _events(compute) if compute is not None else {}
    root = next((s for s in spans if s.span_id == top.parent_span_id), None)
    sends = [t for n, t in root.events if n in SEND_STARTS] if root is not None else []
    first = _secs(start, min(sends)) if len(sends) >= 2 else None
    rid = top.attributes.get("triton.request_id")
    return RequestFacts(
        source="triton", model=str(top.attributes["triton.model_name"]),
        model_version=str(top.attributes.get("triton.model_version", "")),
        trace_id=top.trace_id, start_unix_s=start * NS, end_unix_s=end * NS,
        e2e_seconds=e2e, queue_seconds=_secs(ev.get(QUEUE_START), cev.get(COMPUTE_START)),
        compute_seconds=_secs(cev.get(COMPUTE_START), cev.get(COMPUTE_END)),
        first_response_seconds=first, request_id=str(rid) if rid is not None else None,
        occupancy=(start * NS, end * NS))


def _num(attrs: dict[str, AttrValue], key: str) -> float | None:
    v = attrs.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def genai_model(span: Span) -> str:
    """The model ``span`` names by the OpenTelemetry GenAI conventions
    (:data:`GENAI_MODEL_ATTRIBUTES`, a non-empty string), or ``""`` when it names none."""
    for key in GENAI_MODEL_ATTRIBUTES:
        v = span.attributes.get(key)
        if isinstance(v, str) and v:
            return v
    return ""


def vllm_facts(span: Span, model: str, model_version: str = "") -> RequestFacts | None:
    """Facts of one vLLM ``llm_request`` span served as ``model`` (None for another span
    or one without ``gen_ai.latency.e2e``). A ``gen_ai.response.model`` or
    ``gen_ai.request.model`` attribute of the span itself (:func:`genai_model`), when
    present, names the model instead."""
    if span.name != VLLM_SPAN:
        return None
    a = span.attributes
    e2e = _num(a, "gen_ai.latency.e2e")
    if e2e is None:
        return None
    name = genai_model(span) or model
    start = span.start_ns * NS
    queue = _num(a, "gen_ai.latency.time_in_queue")
    decode = _num(a, "gen_ai.latency.time_in_model_decode")
    prompt = _num(a, "gen_ai.usage.prompt_tokens")
    completion = _num(a, "gen_ai.usage.completion_tokens")
    tpot = (decode / (completion - 1)
            if decode is not None and completion is not None and completion > 1 else None)
    rid = a.get("gen_ai.request.id")
    return RequestFacts(
        source="vllm", model=str(name), model_version=model_version,
        trace_id=span.trace_id, start_unix_s=start, end_unix_s=start + e2e,
        e2e_seconds=e2e, queue_seconds=queue,
        ttft_seconds=_num(a, "gen_ai.latency.time_to_first_token"), tpot_seconds=tpot,
        prefill_seconds=_num(a, "gen_ai.latency.time_in_model_prefill"),
        decode_seconds=decode,
        prompt_tokens=int(prompt) if prompt is not None else None,
        completion_tokens=int(completion) if completion is not None else None,
        request_id=str(rid) if rid is not None else None,
        occupancy=(start + (queue or 0.0), start + e2e))
