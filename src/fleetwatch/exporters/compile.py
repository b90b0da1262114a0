"""Compiling one raw upstream series key into the slots its value goes to (the slow path).

A :class:`SeriesCompiler` is built once per target from a :class:`~.table.SourceTable`; the
normalizer asks it to compile each *distinct* raw series key (``name{labels}`` as written
upstream) once and caches the :class:`~.entry.Entry`. Compiling decides everything about a
series once, so that the normalizer's loop decides nothing: from the table's per-sample
plans (:mod:`.plans`) which rules apply; the label block read once (:mod:`.labelblocks`)
and mapped under each rule (renames, value maps, drops, schema-allowed labels:
:mod:`.blockmaps`); the normalized series prefix rendered and its typed
:data:`~fleetwatch.exporters.snapshot.SeriesKey` recorded in :attr:`SeriesCompiler.keys`,
so nothing downstream re-parses rendered text; its slots and how its value is validated
(:mod:`.validate`). A sample no rule maps is ignored, invalid or unmapped
(:mod:`.unmapped`).

Series that may meet others on one normalized series (lossy label mappings, aliases) are
tracked in :attr:`SeriesCompiler.owners` (:mod:`.owners`): when a second upstream series
lands on a prefix compiled as alone, the first one is compiled again; when an exposition
feeds a shared prefix from one series alone (the others gone), it is alone again. An
unmapped sample's entry keeps the TYPEs it read and holds only at a line where they are
declared alike (the normalizer checks). So what a series compiles to depends on the
exposition being read, never on the ones before.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleetwatch.exporters.blockmaps import WITHOUT_MODEL, BlockMapper, Mapped
from fleetwatch.exporters.entry import Direct, Entry, MeanOnly, Scaled, Shared
from fleetwatch.exporters.labelblocks import Block, read_block
from fleetwatch.exporters.owners import Owners
from fleetwatch.exporters.parser import (
    _NAME_RE,
    LabelPairs,
    Metadata,
    format_value,
)
from fleetwatch.exporters.plans import Plan, table_plans
from fleetwatch.exporters.snapshot import SeriesKey
from fleetwatch.exporters.table import SourceTable, TargetContext
from fleetwatch.exporters.unmapped import UnmappedSamples
from fleetwatch.exporters.validate import LABEL_TOO_LONG, NO_CHECK, NO_MODEL
from fleetwatch.labels.schema import METRICS_BY_NAME
from fleetwatch.labels.text import append_labels, append_rendered

#: ``_new_slot(Direct, (family, prefix))``: a slot NamedTuple made by ``tuple.__new__``
#: (in C), field values in field order.
_new_slot = tuple.__new__


@dataclass(slots=True)
class _Slots:
    """What compiling one series under its rules gathers: its slots by kind, its model,
    and its canonical identity once made (only where series may meet)."""

    direct: list[Direct] = field(default_factory=list)
    scaled: list[Scaled] = field(default_factory=list)
    shared: list[Shared] = field(default_factory=list)
    model: tuple[str, str, str, str] | None = None
    canon: str | None = None


class SeriesCompiler:
    """Compiles raw series keys of one target under one table (see module docstring).

    ``keys`` maps every normalized series prefix compiled so far to its
    :data:`SeriesKey`; ``mean_only`` maps the ``_count`` prefix of a mean-only histogram to
    ``(family index, _sum prefix, +Inf bucket prefix)``; ``dropped_labels`` names the
    upstream labels dropped because the schema has no place for them. Raises
    ``ValueError`` at construction when a rule targets a family the schema lacks.
    """

    def __init__(self, table: SourceTable, ctx: TargetContext,
                 max_label_value_length: int = 4096) -> None:
        self.table = table
        self.ctx = ctx
        self.max_label_value_length = max_label_value_length
        self.keys: dict[str, SeriesKey] = {}
        self.mean_only: dict[str, MeanOnly] = {}
        self._maps = BlockMapper(table, ctx)
        self._unmapped = UnmappedSamples(table.rules)
        #: the owners of the normalized series where series may meet
        self.owners = Owners()
        self._by_sample: dict[str, list[Plan]] = {}
        self._names: set[str] = set()  # sample names known valid
        self._alias_prefixes = tuple(old for old, _new in table.name_prefix_aliases)
        renames = table.label_renames
        #: upstream labels naming the model (TargetContext.defer)
        self._model_labels = [k for k, v in renames.items() if v == "model"] + (
            ["model"] if "model" not in renames else [])
        self._blocks: dict[str, Block] = {}  # label block text → what it says
        self._bounds: dict[tuple[str, str], str] = {}  # le/quantile → canonical spelling
        for rule in table.rules:
            if rule.target not in METRICS_BY_NAME:
                raise ValueError(f"rule for {rule.source}: unknown target {rule.target}")
        self._by_sample = table_plans(table)

    @property
    def dropped_labels(self) -> set[str]:
        """Upstream label names dropped because the schema has no place for them."""
        return self._maps.dropped_labels

    def reset(self) -> None:
        """Forget what was compiled. ``keys`` is replaced, not cleared: a
        :class:`~fleetwatch.exporters.normalize.Normalized` handed out earlier keeps its
        keys."""
        self.keys = {}
        self._maps.clear()
        self._blocks = {}
        self._bounds = {}
        self._names = set()
        self._unmapped.clear()
        self.owners.clear()
        self.mean_only.clear()

    def begin(self) -> None:
        """Start a compiling pass (one exposition): the mappings cached on blocks are
        made again (their runtime labels: the context learns runtimes between passes,
        e.g. of the models a pass deferred); within a pass, a model's runtime is read
        once."""
        self._maps.begin()
        for block in self._blocks.values():
            if block.maps:
                block.maps = {}

    def forget_compiling_caches(self) -> None:
        """Drop the caches that only compiling reads (label blocks, mappings): they pay
        within one exposition, whose series share blocks; the next new series mostly
        bring new blocks (new models)."""
        if self._blocks or self._maps.planned:
            self._blocks = {}
            self._maps.forget_plans()
            self._bounds = {}

    def prune(self, live: Iterable[Entry]) -> None:
        """Keep only what the ``live`` entries' series use (the normalizer evicted the
        others): normalized series keys (``keys`` is replaced, not changed: states handed
        out keep theirs), collision tracking, mean-only histograms; the label-block,
        mapping and pooling caches start again empty."""
        prefixes: set[str] = set()
        for e in live:
            prefixes.update(slot.prefix for slot in e.direct)
            prefixes.update(slot.prefix for slot in e.scaled)
            prefixes.update(slot.prefix for slot in e.shared)
        self.mean_only = {c: v for c, v in self.mean_only.items() if c in prefixes}
        prefixes.update(v.inf_prefix for v in self.mean_only.values())
        self.keys = {p: k for p, k in self.keys.items() if p in prefixes}
        self.owners.keep(prefixes)
        self._maps.clear()
        self._blocks = {}
        self._bounds = {}
        self._names = set()
        self._unmapped.clear()

    def compile(self, key: str, meta: Metadata) -> Entry:
        """The :class:`Entry` of a raw series key (``meta``: the exposition's HELP/TYPE so
        far, to name the family of an unmapped sample: such an entry holds the TYPEs it
        read in ``types_seen``, valid only at a line where they are declared alike).
        Never raises on bad input."""
        if "\x00" in key:
            return Entry(error="NUL byte in the series")
        brace = key.find("{")
        if brace < 0:
            name, text = key.strip(), ""
        else:
            name, text = key[:brace].strip(), key[brace:]
        candidates = self._by_sample.get(name)  # a rule's sample: a valid name
        if candidates is None and name not in self._names:
            if not _NAME_RE.match(name):
                return Entry(error=f"invalid metric name {name!r}")
            if len(self._names) < 100_000:
                self._names.add(name)
        block = self._blocks.get(text)
        if block is None:
            block = self._blocks[text] = read_block(text, self.max_label_value_length)
        if block.error is not None:
            return Entry(error=block.error)
        if block.too_long is not None:
            return Entry(error=block.too_long, reason=LABEL_TOO_LONG)
        if self._alias_prefixes and name.startswith(self._alias_prefixes):
            for old, new in self.table.name_prefix_aliases:
                if name.startswith(old):
                    name = new + name[len(old):]
                    break
            candidates = self._by_sample.get(name)
        if not candidates:
            return self._unmapped.unused(name, meta, block.pairs)
        if block.labels is None:
            block.mapped(self._bounds)
        if block.special is not None:
            return Entry(error=block.special.message, reason=block.special.reason)
        labels = block.labels
        assert labels is not None
        defer = self.ctx.defer
        if defer is not None:
            for k in self._model_labels:
                model = labels.get(k)
                if model is not None:
                    if defer(model):
                        return Entry(deferred=model)
                    break
        if len(candidates) == 1 and candidates[0].simple:
            entry = self._compile_alone(name, block, candidates[0])
            if entry is not None:
                return entry
        return self._compile_rules(name, block, candidates, meta)

    def _compile_rules(self, name: str, block: Block, candidates: list[Plan],
                       meta: Metadata) -> Entry:
        """The entry of a series under every rule that reads its sample (``candidates``):
        its slots, value check, histogram group and model."""
        labels = block.labels
        assert labels is not None
        slots = _Slots()
        check, le, group, no_model, no_value = NO_CHECK, None, "", False, False
        maps_get = block.maps.get
        for plan in candidates:
            rule = plan.rule
            if rule.match and any(labels.get(k) != v for k, v in rule.match):
                continue
            if plan.needs_le and "le" not in labels:
                return Entry(error=f"{name} has no le label")
            mapped = maps_get(plan.sig)
            if mapped is None:
                mapped = self._maps.map(rule, plan, block)
            if mapped is WITHOUT_MODEL:
                no_model = True  # a per-model family's series must name its model
                continue
            check = max(check, plan.check)
            if plan.whole:  # interned: the normalizer compares histograms by identity
                group = sys.intern(rule.source + block.grouping())
                if plan.bucket:
                    le = float(labels["le"])
            mul = plan.mul
            if rule.value_labels:
                factor = _label_product(labels, rule.value_labels)
                if factor is None:
                    no_value = True  # known family, no number to take (e.g. "None")
                    continue
                mul *= factor
            self._slots_of(name, block, plan, mapped, mul, slots)
            if mapped.model is not None:
                slots.model = mapped.model
        if not (slots.direct or slots.scaled or slots.shared):
            if no_model:
                return Entry(error=f"{name} has no model label", reason=NO_MODEL)
            if no_value:
                return Entry()
            return self._unmapped.unmatched(name, meta)
        # the identity is kept only where series may meet (memory: most never do)
        canon = slots.canon
        if slots.shared and canon is None:
            canon = name + block.canonical()
        return Entry(direct=tuple(slots.direct), scaled=tuple(slots.scaled),
                     shared=tuple(slots.shared), model=slots.model, canon=canon or "",
                     check=check, le=le,
                     group=group or (canon or "" if slots.shared else ""), skip=False,
                     rare=le is not None or bool(slots.shared))

    def _slots_of(self, name: str, block: Block, plan: Plan, mapped: Mapped, mul: float,
                  slots: _Slots) -> None:
        """Add to ``slots`` the slot of each target sample of ``plan`` for a series (its
        ``block`` mapped as ``mapped``; ``mul`` the plan's multiplier times the series'
        value labels), recording each normalized series' typed key."""
        rule = plan.rule
        labels = block.labels
        assert labels is not None
        keys = self.keys
        div = plan.div
        slot_scaled = div != 1.0 or mul != 1.0 or rule.negative_is_nan
        mean_only = False
        for t_suffix, tname, extra, extra_names, mean_count, multi, extra_text \
                in plan.samples:
            if extra and not mapped.tail:  # the common case: rendered once per table
                prefix = tname + append_rendered(mapped.base, extra_text)
                if prefix not in keys:
                    keys[prefix] = (tname, self._maps.shared_pairs(mapped.base_pairs + extra))
            elif extra or (plan.le_scaled and t_suffix == "_bucket"):
                tail: tuple[tuple[str, str], ...] = tuple(
                    p for p in mapped.tail if p[0] not in extra_names) + extra if extra \
                    else (("le", _scale_bound(labels["le"], rule.le_divide)),)
                prefix = tname + append_labels(mapped.base, tail)
                if prefix not in keys:
                    keys[prefix] = (tname, self._maps.shared_pairs(mapped.base_pairs + tail))
            else:  # the block's own le/quantile, if any (rendered with the mapping)
                prefix = tname + mapped.full
                if prefix not in keys:
                    keys[prefix] = (tname, mapped.full_pairs)
            if mean_count:
                mean_only = True
            if mapped.lossy or multi:
                if slots.canon is None:
                    slots.canon = name + block.canonical()
                self.owners.track(prefix, slots.canon)
            if prefix in self.owners.shared:
                slots.shared.append(Shared(plan.fam_idx, prefix, div, mul,
                                           rule.negative_is_nan, rule.priority))
            elif slot_scaled:
                slots.scaled.append(Scaled(plan.fam_idx, prefix, div, mul,
                                           rule.negative_is_nan))
            else:
                slots.direct.append(Direct(plan.fam_idx, prefix))
        if mean_only:
            self._note_mean_only(rule.target, plan.fam_idx, mapped.base_pairs, mapped.base)

    def _compile_alone(self, name: str, block: Block, plan: Plan) -> Entry | None:
        """The entry of a series whose sample only ``plan`` reads, when its plan is
        :attr:`Plan.simple` and the series lands on a normalized series no other has
        met (tracked if it may be met); None: :meth:`compile`'s general path decides
        (the same answer for every other case, without the loop over rules and target
        samples)."""
        labels = block.labels
        assert labels is not None
        if plan.needs_le and "le" not in labels:
            return None
        rule = plan.rule
        mapped = block.maps.get(plan.sig)
        if mapped is None:
            mapped = self._maps.map(rule, plan, block)
        if mapped is WITHOUT_MODEL:
            return None
        tname = plan.tname
        prefix = tname + mapped.full
        canon = ""
        if mapped.lossy or plan.multi:
            canon = name + block.canonical()
            self.owners.track(prefix, canon)
        if prefix in self.owners.shared:
            return None
        keys = self.keys
        if prefix not in keys:
            keys[prefix] = (tname, mapped.full_pairs)
        # the slots made in C (_new_slot): a NamedTuple's own constructor is a Python
        # function, paid per new series
        if plan.scaled:
            direct: tuple[Direct, ...] = ()
            scaled: tuple[Scaled, ...] = (_new_slot(Scaled, (
                plan.fam_idx, prefix, plan.div, plan.mul, rule.negative_is_nan)),)
        else:
            direct, scaled = (_new_slot(Direct, (plan.fam_idx, prefix)),), ()
        group = sys.intern(rule.source + (block.group or block.grouping())) \
            if plan.whole else ""
        le = float(labels["le"]) if plan.bucket else None
        return Entry(direct=direct, scaled=scaled, model=mapped.model, canon=canon,
                     check=plan.check, le=le, group=group, skip=False, rare=le is not None)

    def _note_mean_only(self, target: str, fam_idx: int, base_pairs: LabelPairs,
                        base_labels: str) -> None:
        """A mean-only histogram: its _count/+Inf bucket stand only beside a _sum."""
        inf = target + "_bucket" + append_rendered(base_labels, 'le="+Inf"')
        self.keys.setdefault(inf, (target + "_bucket", (*base_pairs, ("le", "+Inf"))))
        self.mean_only[target + "_count" + base_labels] = MeanOnly(
            fam_idx, target + "_sum" + base_labels, inf)


def _label_product(labels: Mapping[str, str], names: tuple[str, ...]) -> float | None:
    """The product of the numbers in the labels ``names`` (``Rule.value_labels``), or None
    when one is missing or not a finite number."""
    out = 1.0
    for k in names:
        try:
            v = float(labels.get(k, ""))
        except ValueError:
            return None
        if not math.isfinite(v):
            return None
        out *= v
    return out


def _scale_bound(bound: str, divide: float) -> str:
    """A canonical bucket bound (already validated) divided into the base unit."""
    value = float(bound)
    if math.isinf(value):
        return format_value(value)
    return format_value(value / divide)
