"""Render the normalized schema with its upstream sources as Markdown (``docs/metrics.md``).

The table is generated from :mod:`fleetwatch.labels.schema` and the source tables of
:mod:`fleetwatch.exporters`; CI fails when the checked-in file differs
(``fleetwatch schema --markdown > docs/metrics.md`` regenerates it).
"""

from __future__ import annotations

from collections import defaultdict

from fleetwatch.exporters.sources import COMPONENT_TABLES, LLM_RUNTIMES, SOURCES
from fleetwatch.exporters.table import Rule
from fleetwatch.labels.dp_aggregation import dp_aggregation
from fleetwatch.labels.schema import LABELS, METRICS, SELF_METRICS, LabelDef, series_labels
from fleetwatch.otlp import semconv
from fleetwatch.traces.histograms import BOUNDS as TRACE_BOUNDS

_SOURCE_NAMES = {kind: name for s in SOURCES for kind, name in s.component_names}

#: ``promtool check metrics`` (2.42 lints and cannot be told not to) findings on
#: fleetwatch's own families that are kept, and why.
LINT_EXCEPTIONS: tuple[tuple[str, str, str], ...] = (
    ("modelserver_request_duration_summary_seconds", "metric name should not include type "
     "'summary'", "a summary beside the histogram of the same quantity needs another name; "
     "renaming would break dashboards and rules for no gain"),
    ("modelserver_queue_duration_summary_seconds", "metric name should not include type "
     "'summary'", "as above"),
    ("modelserver_phase_duration_summary_seconds", "metric name should not include type "
     "'summary'", "as above"),
    ("modelserver_response_cache_lookup_duration_summary_seconds", "metric name should not "
     "include type 'summary'", "as above"),
)


#: Families the sidecar computes itself, and from what (the others: the model registry).
_COMPUTED = {
    "modelserver_model_placement": "fleetwatch GPU accounting (docs/gpus.md)",
    "modelserver_model_memory_footprint_bytes": "fleetwatch GPU accounting (docs/gpus.md)",
}


def label_values(lab: LabelDef) -> tuple[str, ...]:
    """A label's documented values; ``backend`` and ``runtime`` are those of the
    registered sources."""
    if lab.name == "backend":
        return tuple(sorted({s.backend for s in SOURCES}))
    if lab.name == "runtime":
        return tuple(sorted({r for s in SOURCES for r in s.runtimes}))
    return lab.values


def _describe_rule(rule: Rule) -> str:
    src = f"`{rule.source}`"
    if rule.part:
        src += f" `{rule.part}`"
    if rule.match:
        src += "{" + ",".join(f'{k}="{v}"' for k, v in rule.match) + "}"
    bits = []
    if rule.const:
        bits.append(", ".join(f"{k}={v}" for k, v in rule.const))
    if rule.divide != 1.0:
        bits.append(f"÷{rule.divide:g}")
    if rule.multiply != 1.0:
        bits.append(f"×{rule.multiply:g}")
    if rule.as_samples != (("", ()),):
        bits.append("as " + "/".join(s or "value" for s, _ in rule.as_samples))
    if rule.priority:
        bits.append("fallback")
    extra = f" ({'; '.join(bits)})" if bits else ""
    return f"{src}{extra} — {rule.since}"


def feeds() -> dict[str, list[tuple[str, str]]]:
    """Normalized family → [(source name, rule description)] in table order."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for table in COMPONENT_TABLES:
        for rule in table.rules:
            out[rule.target].append((_SOURCE_NAMES.get(table.kind, table.kind),
                                     _describe_rule(rule)))
    return out


_TRACES_NOTE = (
    "Triton 2.51 exports no latency histogram: `modelserver_request_duration_seconds` and "
    "`modelserver_queue_duration_seconds` of a Triton model are mean-only (+Inf bucket, sum, "
    "count) — **unless the sidecar receives Triton's OpenTelemetry traces** (`traces:` in "
    "its configuration, see docs/traces.md). Then, for every Triton model seen in traces, "
    "both come from the traces, with real buckets: "
    + ", ".join(format(b, "g") for b in TRACE_BOUNDS) + " s and +Inf — request time "
    "REQUEST_START → REQUEST_END of the model span (Triton's own `request_duration_us` "
    "clock), queue time QUEUE_START → COMPUTE_START; sum and count are those of the traced "
    "requests (not scaled by sampling), the series' labels those of the mean-only series "
    "they replace. vLLM models keep vLLM's own buckets.")


def _otlp_section() -> list[str]:
    """The OTLP names of every family (``metrics_export:``, :mod:`fleetwatch.otlp.semconv`)."""
    lines = ["### OTLP metrics export", "",
             "With `metrics_export:` (docs/traces.md) every family below but summaries is also "
             "exported over OTLP/HTTP, named after the OpenTelemetry semantic conventions "
             f"v{semconv.SEMCONV_VERSION} where they define the metric — the GenAI names for "
             "LLM models only (runtime " + ", ".join(f"`{r}`" for r in
                                                     sorted(LLM_RUNTIMES)) + "), "
             "with `gen_ai.operation.name` = `" + semconv.OPERATION + "` — and in "
             "fleetwatch's `modelserver.*` namespace otherwise; labels become the attributes "
             "the Labels table names (OTel), else `modelserver.<label>`.", "",
             "| Metric | OTLP name, LLM models | OTLP name, other models | Unit | Buckets |",
             "|---|---|---|---|---|"]
    for m in METRICS:
        if m.type == "summary":
            continue
        llm, other = semconv.metric_name(m, True), semconv.metric_name(m, False)
        rec = semconv.RECOMMENDED_BUCKETS.get(llm)
        if rec is not None:
            bounds = ("recommended (" + ", ".join(format(b, "g") for b in rec) + ") when "
                      "the source's bounds contain them, else the source's")
        else:
            bounds = "the source's" if m.type == "histogram" else ""
        lines.append(f"| `{m.name}` | `{llm}` | `{other}` | `{semconv.unit(m)}` | {bounds} |")
    return lines


def metrics_markdown() -> str:
    """The whole ``docs/metrics.md`` text (deterministic)."""
    f = feeds()
    lines = [
        "# fleetwatch metric schema",
        "",
        "<!-- generated by `fleetwatch schema --markdown`; do not edit. CI checks it. -->",
        "",
        "Normalized inference metrics use the `modelserver_` namespace, fleetwatch's own "
        "metrics `fleetwatch_`. Base units only; counters end in `_total`. Every per-model "
        "series carries `model`, `model_version`, `backend`, `runtime` (and `dp_rank` for "
        "vLLM); registry metadata is on `modelserver_model_info`, joined in queries.",
        "",
        "## Metrics",
        "",
        "| Metric | Type | Unit | Labels | Stability | Meaning | Fed by (source: upstream "
        "metric — versions) |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        sources = "<br>".join(f"**{s}**: {d}" for s, d in f.get(m.name, [])) or \
            _COMPUTED.get(m.name, "fleetwatch (model registry)")
        labels = ", ".join(f"`{lab}`" for lab in series_labels(m))
        otel = f" OTel: `{m.otel}`." if m.otel else ""
        lines.append(f"| `{m.name}` | {m.type} | {m.unit} | {labels} | {m.stability} | "
                     f"{m.help}{otel} | {sources} |")
    lines += ["", "### Latency histograms from traces", "", _TRACES_NOTE]
    lines += ["", *_dp_section()]
    lines += ["", *_otlp_section()]
    lines += ["", "## fleetwatch's own metrics", "",
              "| Metric | Type | Unit | Labels | Meaning |", "|---|---|---|---|---|"]
    for m in SELF_METRICS:
        labels = ", ".join(f"`{lab}`" for lab in m.labels)
        lines.append(f"| `{m.name}` | {m.type} | {m.unit} | {labels} | {m.help} |")
    lines += ["", "## Labels", "", "| Label | Values | Meaning |", "|---|---|---|"]
    for lab in LABELS:
        values = ", ".join(f"`{v}`" for v in label_values(lab))
        otel = f" OTel: `{lab.otel}`." if lab.otel else ""
        lines.append(f"| `{lab.name}` | {values} | {lab.help}{otel} |")
    lines += ["", "## Sources", "", "A target's `kind:` (and `fleetwatch normalize --source`) "
              "is `auto` or one of these.", "",
              "| Kind | Server | Default port | Readiness | Runtime discovery |",
              "|---|---|---|---|---|"]
    for s in SOURCES:
        ready = getattr(s.readiness, "path", None)
        probe = s.runtime_probe.path if s.runtime_probe else None
        lines.append(f"| `{s.kind}` | {s.description} | {s.default_port} | "
                     f"{f'`{ready}`' if ready else '—'} | {f'`{probe}`' if probe else '—'} |")
    lines += ["", "## Upstream families left unmapped on purpose", "",
              "| Source | Family | Why |", "|---|---|---|"]
    for s in SOURCES:
        for fam, why in s.not_mapped:
            lines.append(f"| `{s.kind}` | `{fam}` | {why} |")
    lines += ["", "## promtool lint findings kept", "",
              "`promtool check metrics` lints; these findings on fleetwatch's own families "
              "are kept (upstream families passed through keep their own names, lint or not).",
              "", "| Family | Finding | Why kept |", "|---|---|---|"]
    for fam, finding, why in LINT_EXCEPTIONS:
        lines.append(f"| `{fam}` | {finding} | {why} |")
    return "\n".join(lines) + "\n"


def _dp_section() -> list[str]:
    """The table of how each family carrying ``dp_rank`` aggregates across ranks."""
    lines = ["### Data-parallel engines (`dp_rank`)", "",
             "vLLM with `--data-parallel-size N` runs N engine cores behind one API server "
             "and labels each engine's series `engine=\"0\"…`; fleetwatch keeps them apart "
             "as `dp_rank` (`0` when the engine has no such label) and never sums them. "
             "Aggregate a model across ranks by the family's meaning:", "",
             "| Metric | Across `dp_rank` | Why |", "|---|---|---|"]
    for m in METRICS:
        rule = dp_aggregation(m)
        if rule is not None and "dp_rank" in series_labels(m):
            lines.append(f"| `{m.name}` | `{rule.how}` | {rule.why} |")
    return lines
