"""OpenTelemetry names of the normalized schema (the OTLP metrics export), derived from the
schema table :mod:`fleetwatch.labels.schema` as data: GenAI semantic-convention names where
they exist, for LLM models only; fleetwatch's own ``modelserver.*`` namespace otherwise.

Followed: the GenAI metrics of the OpenTelemetry semantic conventions **v1.37.0**
(``gen-ai-metrics.md``, status *Development*), as also shipped by
``opentelemetry-semantic-conventions`` 0.66b2 (schema 1.44.0), whose registry marks them
moved to the separate ``open-telemetry/semantic-conventions-genai`` repository; and the
hardware metrics (``hw.*``) of the same release for the GPU families. The three
``gen_ai.server.*`` metrics, their units, advised buckets and required attributes
(``gen_ai.operation.name``, ``gen_ai.provider.name``) are unchanged in that repository's
``model/gen-ai/metrics.yaml`` and ``docs/gen-ai/gen-ai-metrics.md`` (copies in
``tests/data/otel-genai/``, compared by ``tests/otlp/test_semconv.py``). Its client
metrics — ``gen_ai.client.operation.duration``, ``…time_to_first_chunk``,
``…time_per_output_chunk``, ``gen_ai.client.token.usage`` — are measured by the caller of
a GenAI API on the response stream it receives; a sidecar beside the server observes no
client's stream, so it exports none of them (the server's own TTFT and TPOT are the
``gen_ai.server.*`` ones).

Rules (every one reads the schema, none is a per-family list):

* **metric name** — :attr:`MetricDef.otel <fleetwatch.labels.schema.MetricDef.otel>` when
  set; a ``gen_ai.*`` name only when the conventions define it as a metric (the three
  ``gen_ai.server.*`` ones) and only for an LLM model's series (:func:`is_llm`; a ranking
  model has no GenAI operation), whose other series take its twin in the fleetwatch
  namespace (``gen_ai.server.request.duration`` → ``modelserver.request.duration``).
  Otherwise (no ``otel`` name, or one the conventions define as a span attribute only,
  ``gen_ai.usage.cache_read.input_tokens``): ``modelserver.`` + the family name without
  the ``modelserver_`` prefix, the ``_total`` of a counter and a base-unit suffix
  (``modelserver_gpu_power_limit_watts`` → ``modelserver.gpu_power_limit``; ``_ratio`` is
  kept, as in ``hw.fan.speed_ratio``).
* **unit** — UCUM (:data:`UNITS`: ``s``, ``By``, ``1``, ``J``, ``W``, ``Cel``), else the
  schema unit as an annotation (``requests`` → ``{request}``).
* **attribute name** — :attr:`LabelDef.otel <fleetwatch.labels.schema.LabelDef.otel>`
  (``model`` → ``gen_ai.request.model``, ``backend`` → ``gen_ai.provider.name``,
  ``token_type`` → ``gen_ai.token.type``, ``gpu_uuid`` → ``hw.id``, …), a ``gen_ai.*`` one
  again for LLM models only; otherwise ``modelserver.<label>``. LLM series also carry the
  required ``gen_ai.operation.name`` (:data:`OPERATION`), ``hw.*`` metrics the required
  ``hw.type`` (``gpu``).
* **buckets** — a GenAI histogram is exported with the conventions' recommended
  boundaries (:data:`RECOMMENDED_BUCKETS`) whenever they are a subset of the source's
  bounds (vLLM's TTFT and TPOT buckets are: the coarsening is exact); otherwise the
  source's own bounds are kept (vLLM's e2e buckets start at 0.3 s: re-bucketing would
  invent counts). Per-request recordings from traces (:data:`TRACE_FAMILIES`) use the
  recommended boundaries, or :data:`fleetwatch.traces.histograms.BOUNDS` for the
  ``modelserver.*`` instruments.

:data:`GENAI_NAMES` is the allow-list a test checks every exported ``gen_ai.*`` name
against (and that list against the conventions' own package).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwatch.exporters.sources import LLM_RUNTIMES
from fleetwatch.labels.schema import LABELS_BY_NAME, METRICS, MetricDef
from fleetwatch.traces.histograms import BOUNDS, FAMILIES

SEMCONV_VERSION = "1.37.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
OWN = "modelserver."
GENAI = "gen_ai."
#: GenAI server metrics' prefix; its twin in the fleetwatch namespace is :data:`OWN`.
GENAI_SERVER = "gen_ai.server."

#: Schema unit → UCUM unit (OpenTelemetry's unit notation); others become ``{unit}``.
UNITS = {"seconds": "s", "bytes": "By", "ratio": "1", "joules": "J", "watts": "W",
         "celsius": "Cel", "boolean": "1", "info": "1"}
#: Units a family name ends with (dropped from a derived name, as OpenTelemetry names do).
BASE_UNITS = ("seconds", "bytes", "joules", "watts", "celsius")

#: The recommended (advisory) explicit bucket boundaries of the GenAI server metrics, s.
RECOMMENDED_BUCKETS: dict[str, tuple[float, ...]] = {
    "gen_ai.server.request.duration": (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56,
                                       5.12, 10.24, 20.48, 40.96, 81.92),
    "gen_ai.server.time_to_first_token": (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
    "gen_ai.server.time_per_output_token": (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                            0.4, 0.5, 0.75, 1.0, 2.5),
}

#: ``gen_ai.operation.name`` of LLM series (neither vLLM's metrics nor its span say chat
#: or completion).
OPERATION = "text_completion"
HW_TYPE = "gpu"

#: Every ``gen_ai.*`` metric and attribute name the schema can give (checked against the
#: conventions' package by a test).
GENAI_METRICS = frozenset(m.otel for m in METRICS if m.otel.startswith(GENAI_SERVER))
GENAI_ATTRIBUTES = frozenset({"gen_ai.operation.name"} | {
    lab.otel for lab in LABELS_BY_NAME.values() if lab.otel.startswith(GENAI)})
GENAI_NAMES = GENAI_METRICS | GENAI_ATTRIBUTES


def is_llm(runtime: str) -> bool:
    """Whether a series' ``runtime`` label names a generative engine (a source's
    ``llm_runtimes``)."""
    return runtime in LLM_RUNTIMES


def own_name(m: MetricDef) -> str:
    """The family's name in the fleetwatch namespace (see module docstring)."""
    if m.otel.startswith(GENAI_SERVER):
        return OWN + m.otel.removeprefix(GENAI_SERVER)
    if m.otel and not m.otel.startswith(GENAI):
        return m.otel
    stem = m.name.removeprefix("modelserver_")
    if m.type == "counter":
        stem = stem.removesuffix("_total")
    if m.unit in BASE_UNITS:
        stem = stem.removesuffix("_" + m.unit)
    return OWN + stem


def metric_name(m: MetricDef, llm: bool) -> str:
    """The OTLP metric name of ``m``'s series (``llm``: the series is an LLM model's)."""
    if m.otel and (not m.otel.startswith(GENAI) or (llm and m.otel in GENAI_METRICS)):
        return m.otel
    return own_name(m)


def unit(m: MetricDef) -> str:
    """The OTLP unit of ``m`` (UCUM, or ``{annotation}``)."""
    return UNITS.get(m.unit) or "{" + m.unit.removesuffix("s") + "}"


def attribute_name(label: str, llm: bool) -> str:
    """The OTLP attribute a normalized label becomes (see module docstring)."""
    lab = LABELS_BY_NAME.get(label)
    otel = lab.otel if lab is not None else ""
    if otel and (llm or not otel.startswith(GENAI)):
        return otel
    return OWN + label


def fixed_attributes(name: str, llm: bool) -> dict[str, str]:
    """Attributes the conventions require beyond the labels: ``gen_ai.operation.name`` on
    LLM series, ``hw.type`` on ``hw.*`` metrics."""
    out = {"gen_ai.operation.name": OPERATION} if llm else {}
    if name.startswith("hw."):
        out["hw.type"] = HW_TYPE
    return out


def attributes(labels: dict[str, str], name: str, llm: bool) -> dict[str, str]:
    """The attributes of a series' data point: its non-empty labels renamed, and
    :func:`fixed_attributes`."""
    out = {attribute_name(k, llm): v for k, v in labels.items() if v}
    out.update(fixed_attributes(name, llm))
    return out


@dataclass(frozen=True)
class Instrument:
    """A histogram recorded per request from traces: OTLP ``name``, the normalized
    ``family`` it is, the fact it records (:meth:`~fleetwatch.traces.facts.RequestFacts.
    metric` short name), ``llm`` (recorded for LLM requests) and ``buckets`` (seconds)."""

    name: str
    family: str
    fact: str
    llm: bool
    buckets: tuple[float, ...]


def _instruments() -> tuple[Instrument, ...]:
    by_name = {m.name: m for m in METRICS}
    out = []
    for family, fact in FAMILIES.items():
        for llm in (True, False):
            name = metric_name(by_name[family], llm)
            out.append(Instrument(name, family, fact, llm,
                                  RECOMMENDED_BUCKETS.get(name, BOUNDS)))
    return tuple(out)


#: Per-request instruments: for LLM (vLLM) requests the GenAI request duration, TTFT, TPOT
#: and ``modelserver.queue.duration``; for others the ``modelserver.*`` twins.
INSTRUMENTS = _instruments()
#: OTLP name → buckets of the per-request instruments (one view each).
INSTRUMENT_BUCKETS = {i.name: i.buckets for i in INSTRUMENTS}


def instruments_for(llm: bool) -> list[Instrument]:
    """The instruments a request records (LLM: a vLLM request)."""
    return [i for i in INSTRUMENTS if i.llm == llm]
