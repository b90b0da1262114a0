"""The mapping-table model: a source adapter as data.

A source (``triton``, ``vllm``, ``dcgm``, ``sglang``, …) maps its upstream families onto the
normalized schema with a :class:`SourceTable` of :class:`Rule` rows plus label renames and
value maps; :mod:`fleetwatch.exporters.compile` turns a table into per-series slots and
:mod:`fleetwatch.exporters.normalize` applies them. Nothing here reads files or the network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from fleetwatch.labels.text import LabelPairs

#: An upstream family type as declared by its ``# TYPE`` line.
SourceType = Literal["counter", "gauge", "histogram", "summary"]

#: Sample-name suffixes by upstream type (prometheus-cpp writes counters without _total,
#: prometheus_client with it; both are accepted).
SUFFIXES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "counter": ("", "_total"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
})


@dataclass(frozen=True)
class ValueMap:
    """Turns the value of one upstream label into normalized labels.

    ``source_label`` is consumed (removed); ``table`` maps its value to labels to add;
    ``missing`` applies when the label is absent (e.g. Triton before r24.08 has no
    ``reason``); ``unknown`` when the value is not in the table (``{value}`` is replaced
    by the lower-cased value).
    """

    source_label: str
    table: Mapping[str, Mapping[str, str]]
    missing: Mapping[str, str] = field(default_factory=dict)
    unknown: Mapping[str, str] = field(default_factory=dict)
    keep_as: str | None = None

    def apply(self, labels: dict[str, str]) -> None:
        if self.source_label not in labels:
            labels.update(self.missing)
            return
        raw = labels.pop(self.source_label)
        if self.keep_as:
            labels[self.keep_as] = raw
        mapped = self.table.get(raw)
        if mapped is None:
            mapped = {k: v.replace("{value}", raw.lower()) for k, v in self.unknown.items()}
        labels.update(mapped)


@dataclass(frozen=True)
class Rule:
    """One row of a mapping table: an upstream family feeding a normalized family.

    * ``source`` — upstream family name as written on the wire in text format 0.0.4;
      ``source_type`` — its type (decides which sample suffixes belong to it).
    * ``target`` — normalized family (must exist in :mod:`fleetwatch.labels.schema`).
    * ``part`` — for histogram/summary sources, take only this sample (``"_sum"`` or
      ``"_count"``) and treat it as a scalar.
    * ``as_samples`` — for scalar sources feeding a histogram/summary target: the target
      sample suffixes (with extra labels) it becomes, e.g. Triton's success counter is
      the ``_count`` and ``_bucket{le="+Inf"}`` of the request-duration histogram.
    * ``divide``/``multiply`` — unit conversion of the value (µs → s is ``divide=1e6``);
      ``le_divide`` converts histogram bounds.
    * ``match`` — only series whose label equals the value; the label is consumed.
    * ``const`` — labels added; ``drop`` — labels removed (colliding series are summed).
    * ``value_map`` — name of a :class:`ValueMap` of the table.
    * ``runtime`` — the ``runtime`` label when the target cannot tell (the model
      configuration read from the server, or the target's configured runtime, win).
    * ``priority`` — lower wins when two rules produce the same series (aliases).
    * ``negative_is_nan`` — the source uses negative values as "no data" sentinels.
    * ``since`` — provenance: which upstream versions expose ``source``.
    * ``value_labels`` — for an info series (value 1) whose facts are label values: the
      value becomes the product of these labels' numbers (vLLM ``cache_config_info``
      ``num_gpu_blocks`` × ``block_size`` = KV-cache tokens); a series where one of them
      is not a number (``"None"``) is left out.
    """

    source: str
    source_type: SourceType
    target: str
    part: str | None = None
    as_samples: tuple[tuple[str, LabelPairs], ...] = (("", ()),)
    divide: float = 1.0
    multiply: float = 1.0
    le_divide: float = 1.0
    match: LabelPairs = ()
    const: LabelPairs = ()
    drop: tuple[str, ...] = ()
    value_map: str | None = None
    runtime: str | None = None
    priority: int = 0
    negative_is_nan: bool = False
    since: str = ""
    value_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceTable:
    """A source adapter as data: rules, label renames, value maps and name aliases.

    ``backend`` is the value of the ``backend`` label; ``label_renames`` maps upstream
    label names to schema labels; ``label_defaults`` are added when absent (vLLM's
    ``dp_rank="0"`` before 0.8.3); ``name_prefix_aliases`` rewrites sample-name prefixes
    before lookup (vLLM's OpenMetrics ``vllm_`` spelling → ``vllm:``);
    ``reads_lora_adapters`` see :mod:`fleetwatch.exporters.adapters`.
    """

    kind: str
    backend: str
    rules: tuple[Rule, ...]
    label_renames: Mapping[str, str] = field(default_factory=dict)
    label_defaults: Mapping[str, str] = field(default_factory=dict)
    value_maps: Mapping[str, ValueMap] = field(default_factory=dict)
    name_prefix_aliases: tuple[tuple[str, str], ...] = ()
    description: str = ""
    #: Read LoRA adapters from ``vllm:lora_requests_info`` (:mod:`.adapters`): a family
    #: whose current state is one series among many, which no per-series rule can read.
    reads_lora_adapters: bool = False

    def combine(self, *others: SourceTable, kind: str | None = None) -> SourceTable:
        """A table with this table's settings and the rules/value maps of all tables."""
        rules = self.rules + tuple(r for t in others for r in t.rules)
        vmaps = dict(self.value_maps)
        for t in others:
            vmaps.update(t.value_maps)
        return SourceTable(
            kind=kind or self.kind, backend=self.backend, rules=rules,
            label_renames=self.label_renames, label_defaults=self.label_defaults,
            value_maps=MappingProxyType(vmaps),
            name_prefix_aliases=self.name_prefix_aliases
            + tuple(a for t in others for a in t.name_prefix_aliases),
            description=self.description,
            reads_lora_adapters=self.reads_lora_adapters,
        )


@dataclass
class TargetContext:
    """Per-target facts the mapping needs: how to label the series it produces.

    ``runtime_for(model)`` gives the ``runtime`` label of a model (Triton reads it from
    ``/v2/models/<m>/config``); ``extra_labels`` are constant labels from configuration.
    ``defer(model)``, when set, says that a model's runtime is about to be learned: its
    series not compiled yet are left out of this exposition (named in
    ``Normalized.deferred``) rather than compiled twice, before and after.
    """

    runtime_for: Callable[[str], str] = lambda _model: "unknown"
    extra_labels: LabelPairs = ()
    model_version: str | None = None
    defer: Callable[[str], bool] | None = None
