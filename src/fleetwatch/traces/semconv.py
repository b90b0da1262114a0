"""OpenTelemetry names of the trace-derived metrics: GenAI semantic conventions where they
define one, fleetwatch's own ``modelserver.*`` namespace otherwise.

Followed: the GenAI metrics of the OpenTelemetry semantic conventions **v1.37.0**
(``gen-ai-metrics.md``, status *Development*), as also shipped by
``opentelemetry-semantic-conventions`` 0.66b2 (schema 1.44.0), whose registry marks them
moved to the separate ``open-telemetry/semantic-conventions-genai`` repository (2026). Only
three server metrics exist there, all histograms in seconds, for **LLM models only** (a
ranking model has no GenAI operation):

* ``gen_ai.server.request.duration`` — e2e of a vLLM request;
* ``gen_ai.server.time_to_first_token`` — its TTFT;
* ``gen_ai.server.time_per_output_token`` — its TPOT (decode ÷ (tokens − 1));

with the required attributes ``gen_ai.operation.name`` and ``gen_ai.provider.name``, the
conditionally required ``gen_ai.request.model``, and the recommended bucket boundaries
below. Queue time, and every Triton (non-GenAI) model's request and queue time, use
``modelserver.*`` names (the ``otel`` names of :mod:`fleetwatch.labels.schema`) with
``modelserver.model.name`` / ``modelserver.model.version`` attributes: no ``gen_ai.*``
name is invented. :data:`GENAI_NAMES` is the allow-list a test checks every exported
``gen_ai.*`` name against.
"""

from __future__ import annotations

from dataclasses import dataclass

SEMCONV_VERSION = "1.37.0"

#: The recommended (advisory) explicit bucket boundaries of the GenAI server metrics, s.
REQUEST_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                            10.24, 20.48, 40.96, 81.92)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)

#: Every ``gen_ai.*`` metric and attribute name the conventions define that we use.
GENAI_METRICS = frozenset({"gen_ai.server.request.duration",
                           "gen_ai.server.time_to_first_token",
                           "gen_ai.server.time_per_output_token"})
GENAI_ATTRIBUTES = frozenset({"gen_ai.operation.name", "gen_ai.provider.name",
                              "gen_ai.request.model"})
GENAI_NAMES = GENAI_METRICS | GENAI_ATTRIBUTES
#: ``gen_ai.operation.name`` of vLLM's requests (its span does not say chat or completion).
OPERATION = "text_completion"


@dataclass(frozen=True)
class Instrument:
    """One exported histogram: OTel ``name``, the fact it records
    (:meth:`~fleetwatch.traces.facts.RequestFacts.metric` short name), ``llm_only``, its
    ``buckets`` (seconds) and ``description``."""

    name: str
    fact: str
    llm_only: bool
    buckets: tuple[float, ...]
    description: str


#: The trace-derived instruments (Triton models: the two modelserver.* ones only).
INSTRUMENTS = (
    Instrument("gen_ai.server.request.duration", "request", True, REQUEST_DURATION_BUCKETS,
               "Generative AI server request duration (vLLM span gen_ai.latency.e2e)."),
    Instrument("gen_ai.server.time_to_first_token", "ttft", True, TTFT_BUCKETS,
               "Time to generate first token (vLLM span gen_ai.latency.time_to_first_token)."),
    Instrument("gen_ai.server.time_per_output_token", "tpot", True, TPOT_BUCKETS,
               "Time per output token after the first (decode time / (tokens - 1))."),
    Instrument("modelserver.request.duration", "request", False, REQUEST_DURATION_BUCKETS,
               "End-to-end request latency of a non-LLM model (Triton REQUEST_START to "
               "REQUEST_END)."),
    Instrument("modelserver.queue.duration", "queue", False, REQUEST_DURATION_BUCKETS,
               "Time waiting in the scheduler queue (Triton QUEUE_START to COMPUTE_START, "
               "vLLM gen_ai.latency.time_in_queue)."),
)


def instruments_for(llm: bool) -> list[Instrument]:
    """The instruments a request records: LLM requests the GenAI ones and queue time;
    others request and queue time in the modelserver namespace."""
    if llm:
        return [i for i in INSTRUMENTS if i.llm_only or i.fact == "queue"]
    return [i for i in INSTRUMENTS if not i.llm_only]


def attributes(model: str, model_version: str, llm: bool,
               provider: str) -> dict[str, str]:
    """The attributes of a request's data points."""
    if llm:
        return {"gen_ai.operation.name": OPERATION, "gen_ai.provider.name": provider,
                "gen_ai.request.model": model}
    return {"modelserver.model.name": model, "modelserver.model.version": model_version}
