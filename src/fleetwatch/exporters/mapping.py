"""The mapping engine: declarative source tables in, normalized families out.

A source adapter (``triton``, ``vllm``, ``dcgm``, …) is only data: a :class:`SourceTable`
of :class:`Rule` rows plus label renames and value maps. This module compiles a table
into a lookup from upstream sample name to rules, and :class:`Normalizer` applies it to
an exposition: parse → map → aggregate, caching the mapping of every raw series key
(label sets repeat on every scrape, so steady-state cost is one dict lookup per line).

Aggregation when two upstream series land on one normalized series:

* same rule priority, different upstream series → **summed** (Triton per-GPU instance
  series with ``gpu_uuid`` dropped; dcgm FB free + used + reserved = total);
* different priority → the **lower priority number wins** (version aliases such as
  vLLM ``kv_cache_usage_perc`` over ``gpu_cache_usage_perc``);
* the same upstream series twice (a duplicated family) → the **last** sample wins.

Counter values pass through unchanged (only unit-scaled), so counter resets reach
Prometheus, whose ``rate()`` handles them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from fleetwatch.exporters.parser import (
    ExpositionError,
    LabelPairs,
    Metadata,
    format_value,
    iter_lines,
    parse_value,
    render_labels,
    split_key,
    split_sample_line,
)
from fleetwatch.exporters.snapshot import SeriesKey
from fleetwatch.labels.schema import (
    CORE_LABEL_ORDER,
    METRICS,
    METRICS_BY_NAME,
    MetricDef,
    allowed_labels,
)

log = logging.getLogger("fleetwatch.mapping")

SourceType = str  # "counter" | "gauge" | "histogram" | "summary"
_EMPTY: Mapping[str, str] = MappingProxyType({})

#: Sample-name suffixes by upstream type (prometheus-cpp writes counters without _total,
#: prometheus_client with it; both are accepted).
_SUFFIXES = {
    "counter": ("", "_total"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}
_IGNORED_SUFFIXES = ("_created",)


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


@dataclass(frozen=True)
class SourceTable:
    """A source adapter as data: rules, label renames, value maps and name aliases.

    ``backend`` is the value of the ``backend`` label; ``label_renames`` maps upstream
    label names to schema labels; ``label_defaults`` are added when absent (vLLM's
    ``dp_rank="0"`` before 0.8.3); ``name_prefix_aliases`` rewrites sample-name prefixes
    before lookup (vLLM's OpenMetrics ``vllm_`` spelling → ``vllm:``).
    """

    kind: str
    backend: str
    rules: tuple[Rule, ...]
    label_renames: Mapping[str, str] = field(default_factory=dict)
    label_defaults: Mapping[str, str] = field(default_factory=dict)
    value_maps: Mapping[str, ValueMap] = field(default_factory=dict)
    name_prefix_aliases: tuple[tuple[str, str], ...] = ()
    description: str = ""

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
        )


@dataclass
class TargetContext:
    """Per-target facts the mapping needs: how to label the series it produces.

    ``runtime_for(model)`` gives the ``runtime`` label of a model (Triton reads it from
    ``/v2/models/<m>/config``); ``extra_labels`` are constant labels from configuration.
    """

    runtime_for: Callable[[str], str] = lambda _model: "unknown"
    extra_labels: LabelPairs = ()
    model_version: str | None = None


_FAMILY_ORDER = {m.name: i for i, m in enumerate(METRICS)}
# Slots of a compiled series: where its value goes.
_Direct = tuple[int, str]  # (family index, series prefix): value copied as is
_Scaled = tuple[int, str, float, float, bool]  # + divide, multiply, negative-is-NaN
_Shared = tuple[int, str, float, float, bool, int]  # + priority: may meet other series


@dataclass(slots=True)
class _Entry:
    """Compiled mapping of one raw upstream series key."""

    direct: tuple[_Direct, ...] = ()
    scaled: tuple[_Scaled, ...] = ()
    shared: tuple[_Shared, ...] = ()
    unmapped_family: str | None = None
    error: str | None = None
    model: tuple[str, str, str, str] | None = None  # (model, version, backend, runtime)
    canon: str = ""  # the upstream series' canonical identity (duplicates: last wins)
    skip: bool = False  # an error, an unmapped family or a sample no rule uses
    more: bool = False  # has scaled or shared slots

    def __post_init__(self) -> None:
        self.more = bool(self.scaled or self.shared)
        self.skip = not (self.direct or self.more)


def value_of(v: float | str) -> float:
    """A normalized sample value as a float (values copied unscaled stay upstream text)."""
    return v if v.__class__ is float else float(v)


def _text_of(v: float | str) -> str:
    return v if v.__class__ is str else format_value(v)  # type: ignore[arg-type]


@dataclass
class Normalized:
    """The normalized state of one upstream exposition.

    ``families[i]`` maps a rendered series prefix (``name{labels}``) to its value for
    family ``METRICS[i]``: a float, or the upstream's own number text when the value was
    copied unscaled (use :func:`value_of`). ``models`` are the
    ``(model, model_version, backend, runtime)`` seen; ``unmapped`` the upstream family
    names no rule knows; ``meta.invalid`` the skipped lines.
    """

    families: list[dict[str, float | str]]
    models: set[tuple[str, str, str, str]]
    unmapped: set[str]
    meta: Metadata
    passthrough: dict[str, list[str]] = field(default_factory=dict)

    @property
    def series_count(self) -> int:
        return sum(len(f) for f in self.families)

    def key(self, prefix: str) -> SeriesKey:
        """The typed :data:`~fleetwatch.exporters.snapshot.SeriesKey` of a series prefix of
        :attr:`families` (sample name and label pairs, values unescaped)."""
        return split_key(prefix)

    def samples(self) -> Iterable[tuple[str, float]]:
        """Yield ``(series_prefix, value)`` for every normalized sample, schema order."""
        for fam in self.families:
            for prefix, v in fam.items():
                yield prefix, value_of(v)


class Normalizer:
    """Applies one :class:`SourceTable` to successive expositions of one upstream target.

    Thread-compatible, not thread-safe: use one instance per target. ``passthrough=True``
    re-emits upstream families that no rule knows, unchanged.
    """

    #: The compiled-series cache is cleared when it grows past this many entries per
    #: sample line of the last exposition (label churn, e.g. timestamps in label values).
    CACHE_SLACK = 3

    def __init__(self, table: SourceTable, ctx: TargetContext | None = None,
                 passthrough: bool = False) -> None:
        self.table = table
        self.ctx = ctx or TargetContext()
        self.passthrough = passthrough
        self._cache: dict[str, _Entry] = {}
        self._owner: dict[str, str] = {}  # normalized series → first upstream key seen
        self._shared: set[str] = set()  # normalized series fed by several upstream series
        self._stale: set[str] = set()  # upstream series (canonical) to compile again
        self._mean_only: dict[str, tuple[int, str, str]] = {}  # _count → (family, _sum, +Inf)
        self._allowed: dict[str, frozenset[str]] = {}
        #: Upstream label names dropped because the schema has no place for them.
        self.dropped_labels: set[str] = set()
        self._by_sample: dict[str, list[tuple[Rule, str]]] = {}
        self._known_families: set[str] = set()
        self._created_bases: set[str] = set()
        self._source_types: dict[str, str] = {}
        self._multi_fed = _multi_fed(table.rules)
        for rule in table.rules:
            self._source_types[rule.source] = rule.source_type
            self._created_bases.add(rule.source)
            if rule.source.endswith("_total"):
                self._created_bases.add(rule.source[:-6])
            if rule.target not in METRICS_BY_NAME:
                raise ValueError(f"rule for {rule.source}: unknown target {rule.target}")
            self._known_families.add(rule.source)
            suffixes = (rule.part,) if rule.part else _SUFFIXES[rule.source_type]
            for suffix in suffixes:
                self._by_sample.setdefault(rule.source + suffix, []).append((rule, suffix))

    def invalidate(self) -> None:
        """Forget compiled series (call when the context, e.g. a model's runtime, changes)."""
        self._cache.clear()
        self._owner.clear()
        self._shared.clear()
        self._mean_only.clear()

    # -- hot path -------------------------------------------------------------------
    def normalize(self, text: str) -> Normalized:
        """Normalize one exposition body. Never raises on bad input (see ``meta.invalid``)."""
        result = self._normalize(text)
        if self._stale:
            # A series met another on one normalized series after the first had been
            # compiled as alone: compile that one again, now knowing, and redo this
            # exposition (the rest of the cache is warm, so this costs a steady cycle).
            stale = self._stale
            for key in [k for k, e in self._cache.items() if e.canon in stale]:
                del self._cache[key]
            self._stale = set()
            result = self._normalize(text)
        if len(self._cache) > self.CACHE_SLACK * max(result.meta.sample_lines, 1000):
            self.invalidate()
        return result

    def _normalize(self, text: str) -> Normalized:
        meta = Metadata()
        families: list[dict[str, float | str]] = [{} for _ in METRICS]
        models: set[tuple[str, str, str, str]] = set()
        unmapped: set[str] = set()
        passthrough: dict[str, list[str]] = {}
        agg: dict[str, list] = {}
        cache = self._cache
        compile_entry = self._compile
        add_model = models.add
        bad = meta.bad
        sample_lines = 0
        cache_get = cache.get
        for line, lineno in iter_lines(text, meta):
            # Fast path: "key value" whose key is known (label sets repeat every scrape).
            sp = line.rfind(" ")
            key = line[:sp]
            entry = cache_get(key)
            if entry is not None and line[-1] != "\r":
                tok = line[sp + 1:]
            else:
                split = split_sample_line(line)
                if split.__class__ is str:
                    bad(lineno, split, line)  # type: ignore[arg-type]
                    continue
                key, tok = split  # type: ignore[misc]
                entry = cache_get(key)
                if entry is None:
                    entry = compile_entry(key, meta)
                    cache[key] = entry
            sample_lines += 1
            if entry.skip:
                if entry.error is not None:
                    bad(lineno, entry.error, key)
                elif entry.unmapped_family is not None:
                    unmapped.add(entry.unmapped_family)
                    if self.passthrough:
                        passthrough.setdefault(entry.unmapped_family, []).append(
                            f"{key} {tok}")
                continue
            if "_" in tok:
                bad(lineno, f"invalid sample value {tok!r}", key)
                continue
            try:
                value = float(tok)
            except ValueError:
                bad(lineno, f"invalid sample value {tok!r}", key)
                continue
            if entry.model is not None:
                add_model(entry.model)
            direct = entry.direct
            if direct:
                # finite values keep the upstream's text; NaN/±Inf get canonical spelling
                out: float | str = tok if value - value == 0 else value
                for fam_idx, prefix in direct:
                    families[fam_idx][prefix] = out
            if not entry.more:
                continue
            for fam_idx, prefix, div, mul, neg_nan in entry.scaled:
                v = value / div * mul
                families[fam_idx][prefix] = math.nan if neg_nan and v < 0 else v
            for fam_idx, prefix, div, mul, neg_nan, prio in entry.shared:
                v = value / div * mul
                if neg_nan and v < 0:
                    v = math.nan
                cur = agg.get(prefix)
                if cur is None:
                    agg[prefix] = [v, prio, entry.canon, fam_idx]
                elif prio < cur[1] or cur[2] == entry.canon:
                    cur[0], cur[1], cur[2] = v, prio, entry.canon
                elif prio == cur[1]:
                    cur[0] += v
                    cur[2] = None  # an aggregate of several upstream series
        meta.sample_lines = sample_lines
        for prefix, (v, _prio, _key, fam_idx) in agg.items():
            families[fam_idx][prefix] = v
        for count_prefix, (fam_idx, sum_prefix, inf_prefix) in self._mean_only.items():
            fam = families[fam_idx]
            if count_prefix in fam and sum_prefix not in fam:
                # Triton without the duration counter (counter_latencies=false, partial
                # expositions): a request count is no latency; emit nothing
                del fam[count_prefix]
                fam.pop(inf_prefix, None)
        return Normalized(families, models, unmapped, meta, passthrough)

    # -- slow path: once per distinct upstream series --------------------------------
    def _compile(self, key: str, meta: Metadata) -> _Entry:
        try:
            name, pairs = split_key(key)
        except ExpositionError as exc:
            return _Entry(error=str(exc))
        for old, new in self.table.name_prefix_aliases:
            if name.startswith(old):
                name = new + name[len(old):]
                break
        candidates = self._by_sample.get(name)
        if not candidates:
            if name.endswith(_IGNORED_SUFFIXES) and name[:-8] in self._created_bases:
                return _Entry()  # prometheus_client's _created samples: not data
            fam = self._family_of(name, meta)
            if fam in self._source_types:
                typ = self._source_types[fam]
                if name[len(fam):] in _SUFFIXES[typ]:
                    return _Entry()  # a sample of a known family that no rule uses
                return _Entry(error=f"{name} is not a sample of {typ} family {fam} "
                                    f"(expected suffixes {', '.join(_SUFFIXES[typ])})")
            return _Entry(unmapped_family=fam)
        labels = dict(pairs)
        for special in ("le", "quantile"):
            if special in labels:  # canonical spelling: "+inf"/"Inf" → "+Inf", "1" → "1.0"
                try:
                    labels[special] = format_value(parse_value(labels[special]))
                except ExpositionError:
                    return _Entry(error=f"invalid {special} label {labels[special]!r}")
        # the upstream series' identity, whatever its spelling ("m" = "m{}", le="+inf")
        canon = name + render_labels(tuple(sorted(labels.items())))
        direct: list[_Direct] = []
        scaled_slots: list[_Scaled] = []
        shared: list[_Shared] = []
        model_id = None
        for rule, suffix in candidates:
            if any(labels.get(k) != v for k, v in rule.match):
                continue
            if suffix == "_bucket" and not rule.part and "le" not in labels:
                return _Entry(error=f"{name} has no le label")
            out, lossy = self._map_labels(rule, labels)
            target = rule.target
            tdef = METRICS_BY_NAME[target]
            if rule.part or rule.source_type in ("counter", "gauge"):
                samples = rule.as_samples
            else:
                samples = ((suffix, ()),)
            # Unit conversion applies to values in the unit (sums, quantiles, gauges,
            # counters), never to observation counts (_count, _bucket).
            scaled = (rule.source_type in ("counter", "gauge") or suffix == "_sum"
                      or (rule.source_type == "summary" and suffix == ""))
            div, mul = (rule.divide, rule.multiply) if scaled else (1.0, 1.0)
            fam_idx = _FAMILY_ORDER[target]
            # render the labels once; le/quantile always come last
            tail_out = [(k, out.pop(k)) for k in ("quantile", "le") if k in out]
            base_labels = render_labels(_ordered(out, tdef))
            mean_only = False
            for t_suffix, extra in samples:
                tail = list(tail_out)
                if extra:
                    tail = [p for p in tail if p[0] not in dict(extra)] + list(extra)
                elif t_suffix == "_bucket" and rule.le_divide != 1.0:
                    tail = [("le", _scale_bound(labels["le"], rule.le_divide))]
                prefix = target + t_suffix + _append_labels(base_labels, tail)
                if t_suffix == "_count" and rule.as_samples != (("", ()),):
                    mean_only = True
                if lossy or (target, t_suffix) in self._multi_fed:
                    # this series may meet others on one normalized series: track it
                    owner = self._owner.setdefault(prefix, canon)
                    if owner != canon and prefix not in self._shared:
                        self._shared.add(prefix)
                        self._stale.add(owner)  # the owner was compiled as alone
                if prefix in self._shared:
                    shared.append((fam_idx, prefix, div, mul, rule.negative_is_nan,
                                   rule.priority))
                elif div != 1.0 or mul != 1.0 or rule.negative_is_nan:
                    scaled_slots.append((fam_idx, prefix, div, mul, rule.negative_is_nan))
                else:
                    direct.append((fam_idx, prefix))
            if mean_only:
                # a mean-only histogram: its _count/+Inf bucket stand only beside a _sum
                self._mean_only[target + "_count" + base_labels] = (
                    fam_idx, target + "_sum" + base_labels,
                    target + "_bucket" + base_labels[:-1] + ',le="+Inf"}')
            if tdef.per_model and "model" in out:
                model_id = (out["model"], out.get("model_version", ""), out["backend"],
                            out.get("runtime", "unknown"))
        if not (direct or scaled_slots or shared):
            return _Entry(unmapped_family=self._family_of(name, meta))
        return _Entry(direct=tuple(direct), scaled=tuple(scaled_slots), shared=tuple(shared),
                      model=model_id, canon=canon)

    def _map_labels(self, rule: Rule, labels: dict[str, str]) -> tuple[dict[str, str], bool]:
        """The normalized labels of an upstream series under ``rule``.

        Renamed labels (the table's renames) come first; other upstream labels are kept
        only when the schema allows them on the target metric and nothing renamed
        produced them already (an upstream ``model_version`` never overrides the one
        renamed from Triton's ``version``). Every other upstream label is dropped —
        series that then coincide are summed — and named once in a log line. The flag
        says whether the mapping lost information (a dropped label, a value map), i.e.
        whether other upstream series may land on the same normalized series.
        """
        renames = self.table.label_renames
        tdef = METRICS_BY_NAME[rule.target]
        allowed = self._allowed.get(rule.target)
        if allowed is None:
            allowed = self._allowed[rule.target] = _allowed_labels(tdef)
        consumed = {k for k, _ in rule.match}
        vmap = self.table.value_maps[rule.value_map] if rule.value_map else None
        if vmap is not None:
            consumed.add(vmap.source_label)
        out: dict[str, str] = {}
        lossy = vmap is not None
        for k, v in labels.items():
            if k in consumed or k in ("le", "quantile"):
                continue
            new = renames.get(k)
            if new is not None:
                out[new] = v
        for k, v in labels.items():
            if k in consumed or k in renames or k in ("le", "quantile"):
                continue
            if k in allowed and k not in out:
                out[k] = v
                continue
            lossy = True
            if k not in self.dropped_labels:
                self.dropped_labels.add(k)
                log.info("%s: dropping upstream label %r (not in the schema of %s); series "
                         "that differ only by it are summed", self.table.kind, k, rule.target)
        for k in ("le", "quantile"):
            if k in labels:
                out[k] = labels[k]
        for k, v in self.table.label_defaults.items():
            if k in allowed:
                out.setdefault(k, v)
        if vmap is not None:
            vm_in = {vmap.source_label: labels[vmap.source_label]} \
                if vmap.source_label in labels else {}
            vmap.apply(vm_in)
            out.update(vm_in)
        for k in rule.drop:
            if out.pop(k, None) is not None:
                lossy = True
        out.update(rule.const)
        out["backend"] = self.table.backend
        if tdef.per_model:
            if self.ctx.model_version is not None:
                out.setdefault("model_version", self.ctx.model_version)
            if "model" in out:
                runtime = self.ctx.runtime_for(out["model"])
                if runtime == "unknown" and rule.runtime:
                    runtime = rule.runtime
                out["runtime"] = runtime
        else:
            for k in ("model", "model_version", "runtime"):
                out.pop(k, None)
        out.update(self.ctx.extra_labels)
        return out, lossy

    def _family_of(self, name: str, meta: Metadata) -> str:
        """Best guess of the upstream family a sample name belongs to (prometheus_client's
        ``X_created`` gauges count as part of family ``X``)."""
        if name.endswith("_created"):
            base = name[:-8]
            for fam in (base, base + "_total"):
                if fam in meta.types:
                    return fam
        if name in meta.types:
            return name
        for suffix in ("_bucket", "_sum", "_count", "_total", "_created", "_info"):
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                if base in meta.types or base in self._known_families:
                    return base
        return name


def _ordered(labels: Mapping[str, str], tdef: MetricDef) -> LabelPairs:
    """Core labels first, then the metric's own labels (schema order), then any other
    labels alphabetically, ``quantile``/``le`` last."""
    head = [(k, labels[k]) for k in CORE_LABEL_ORDER if k in labels]
    own = [k for k in tdef.labels if k in labels and k not in CORE_LABEL_ORDER
           and k not in ("le", "quantile")]
    head += [(k, labels[k]) for k in own]
    tail_keys = sorted(k for k in labels if k not in CORE_LABEL_ORDER
                       and k not in ("le", "quantile") and k not in own)
    tail = [(k, labels[k]) for k in tail_keys]
    last = [(k, labels[k]) for k in ("quantile", "le") if k in labels]
    return tuple(head + tail + last)


def _append_labels(rendered: str, tail: list[tuple[str, str]]) -> str:
    """Append label pairs to an already rendered label set."""
    if not tail:
        return rendered
    more = render_labels(tuple(tail))
    return more if not rendered else rendered[:-1] + "," + more[1:]


def _written(rule: Rule) -> set[str]:
    """The sample suffixes of its target that a rule writes."""
    if rule.part or rule.source_type in ("counter", "gauge"):
        return {suffix for suffix, _ in rule.as_samples}
    return set(_SUFFIXES[rule.source_type])


def _multi_fed(rules: Iterable[Rule]) -> set[tuple[str, str]]:
    """(target, suffix) pairs that two rules may both write with the same labels (their
    constant labels agree): aliases, backend-vs-core histograms, dcgm memory parts.
    Only those series need collision tracking (with lossy mappings)."""
    rules = list(rules)
    out: set[tuple[str, str]] = set()
    for i, a in enumerate(rules):
        for b in rules[i + 1:]:
            if a.target != b.target:
                continue
            ca, cb = dict(a.const), dict(b.const)
            if any(ca[k] != cb[k] for k in ca.keys() & cb.keys()):
                continue
            out |= {(a.target, s) for s in _written(a) & _written(b)}
    return out


def _scale_bound(bound: str, divide: float) -> str:
    """A canonical bucket bound (already validated) divided into the base unit."""
    value = float(bound)
    if math.isinf(value):
        return format_value(value)
    return format_value(value / divide)


def _allowed_labels(tdef: MetricDef) -> frozenset[str]:
    return frozenset(allowed_labels(tdef))


def render(normalized: Iterable[Normalized], extra_families: Mapping[str, list[str]] = _EMPTY,
           collisions: list[str] | None = None) -> str:
    """Render normalized expositions (several targets) as one text-format 0.0.4 body.

    Families come in schema order, each with one HELP/TYPE; ``extra_families`` (e.g. the
    registry's ``modelserver_model_info``) adds pre-rendered series lines to a family.
    Pass-through families follow, unchanged. When two targets produce the same series
    (two servers of one kind without distinguishing ``labels``), the first target's is
    kept and the series is appended to ``collisions`` — never a duplicate series.
    """
    items = list(normalized)
    out: list[str] = []
    for i, mdef in enumerate(METRICS):
        lines: list[str] = []
        seen: set[str] | None = set() if len(items) > 1 else None
        for n in items:
            fam = n.families[i]
            if not fam:
                continue
            if seen is None:
                lines.extend([p + " " + (v if v.__class__ is str else format_value(v))
                              for p, v in fam.items()])
                continue
            for p, v in fam.items():
                if p in seen:
                    if collisions is not None:
                        collisions.append(p)
                    continue
                seen.add(p)
                lines.append(f"{p} {_text_of(v)}")
        lines.extend(extra_families.get(mdef.name, ()))
        if not lines:
            continue
        out.append(f"# HELP {mdef.name} {mdef.help}")
        out.append(f"# TYPE {mdef.name} {mdef.type}")
        out.extend(lines)
    for n in items:
        for fam_name, lines in n.passthrough.items():
            typ = n.meta.types.get(fam_name)
            if fam_name in n.meta.helps:
                out.append(f"# HELP {fam_name} {n.meta.helps[fam_name]}")
            if typ:
                out.append(f"# TYPE {fam_name} {typ}")
            out.extend(lines)
    return "\n".join(out) + "\n" if out else ""
