"""Compiling one raw upstream series key into the slots its value goes to (the slow path).

A :class:`SeriesCompiler` is built once per target from a :class:`~.table.SourceTable`; the
normalizer asks it to compile each *distinct* raw series key (``name{labels}`` as written
upstream) once and caches the :class:`~.entry.Entry`. Compiling decides, from the table's
per-sample plans (:mod:`.plans`), which rules apply, maps the
labels (renames, value maps, drops, schema-allowed labels), renders the normalized series
prefix and records its typed :data:`~fleetwatch.exporters.snapshot.SeriesKey` in
:attr:`SeriesCompiler.keys`, so nothing downstream re-parses rendered text.

Series that may meet others on one normalized series (lossy label mappings, aliases) are
tracked: when a second upstream series lands on a prefix compiled as alone, the first one's
canonical identity is put in :attr:`SeriesCompiler.stale` and the normalizer recompiles it;
when an exposition feeds a shared prefix from one series alone (the others gone),
:meth:`SeriesCompiler.unshare` makes it alone again. An unmapped sample's family and TYPE
come from the TYPE lines before it: its entry keeps the TYPEs it read (``types_seen``)
and holds only at a line where they are declared alike (the normalizer checks). So
what a series compiles to depends on the exposition being read, never on the ones before.

Why this module is long: compiling decides everything about a series once — which rules
apply, its labels, its slots and how its value is validated (:mod:`.validate`) — so that
the normalizer's loop decides nothing; what it decides once per table is :mod:`.plans`,
what it makes is :mod:`.entry`, and the rest is one decision per series.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from fleetwatch.exporters.entry import (
    NOT_DATA,
    Direct,
    Entry,
    MeanOnly,
    Scaled,
    Shared,
)
from fleetwatch.exporters.labelblocks import Block, OwnTail, read_block
from fleetwatch.exporters.labelmaps import LabelMapper, LabelPlan
from fleetwatch.exporters.parser import (
    _NAME_RE,
    LabelPairs,
    Metadata,
    format_value,
    render_labels,
)
from fleetwatch.exporters.plans import Plan, table_plans
from fleetwatch.exporters.snapshot import SeriesKey
from fleetwatch.exporters.table import SUFFIXES, Rule, SourceTable, TargetContext
from fleetwatch.exporters.validate import (
    LABEL_TOO_LONG,
    NO_CHECK,
    NO_MODEL,
    TYPE_MISMATCH,
    fits_type,
)
from fleetwatch.labels.schema import (
    METRICS_BY_NAME,
)

_IGNORED_SUFFIXES = ("_created",)

class Mapped(NamedTuple):
    """A label block mapped under a rule."""

    tail: tuple[tuple[str, str], ...]  # the le/quantile pairs kept
    base_pairs: LabelPairs  # the other pairs
    base: str  # ``base_pairs`` rendered (``{…}`` or "")
    lossy: bool  # two blocks may map alike (labels dropped)
    model: tuple[str, str, str, str] | None  # (model, version, backend, runtime)
    full_pairs: LabelPairs  # base and tail pairs
    full: str  # ``full_pairs`` rendered


#: ``_new_slot(Direct, (family, prefix))``: a slot NamedTuple made by ``tuple.__new__``
#: (in C), field values in field order.
_new_slot = tuple.__new__

#: The mapping of a block that a per-model family cannot take (no model label).
_NO_MODEL = Mapped((), (), "", False, None, (), "")


class _Base(NamedTuple):
    """The base labels (no le/quantile) of blocks alike: pairs, rendered, model."""

    pairs: LabelPairs
    rendered: str
    model: tuple[str, str, str, str] | None


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
        self.stale: set[str] = set()  # upstream series (canonical) to compile again
        self._mapper = LabelMapper(table, ctx)
        # label pairs and label sets shared by the keys (one model's series repeat them)
        self._pool: dict[tuple[str, str], tuple[str, str]] = {}
        self._sets: dict[LabelPairs, LabelPairs] = {}
        self._owner: dict[str, str] = {}  # normalized series → first upstream key seen
        self._shared: set[str] = set()  # normalized series fed by several upstream series
        self._by_sample: dict[str, list[Plan]] = {}
        self._names: set[str] = set()  # sample names known valid
        # each distinct Entry.types_seen, once, and per sample name the names it reads
        # (bounded: cleared with the names)
        self._seen: dict[tuple[tuple[str, ...], tuple[str | None, ...]],
                         tuple[tuple[str, ...], tuple[str | None, ...]]] = {}
        self._type_names: dict[str, tuple[str, ...]] = {}
        self._alias_prefixes = tuple(old for old, _new in table.name_prefix_aliases)
        renames = table.label_renames
        #: upstream labels naming the model (TargetContext.defer)
        self._model_labels = [k for k, v in renames.items() if v == "model"] + (
            ["model"] if "model" not in renames else [])
        self._blocks: dict[str, Block] = {}  # label block text → what it says
        self._bounds: dict[tuple[str, str], str] = {}  # le/quantile → canonical spelling
        # (signature, label names, value-map value) → how they map (None: no model)
        self._plans: dict[tuple[int, tuple[str, ...], str | None], LabelPlan | None] = {}
        # (label plan, rule runtime, values) → (base pairs, rendered, model): the base
        # labels of blocks alike but for le/quantile (see _map)
        self._bases: dict[tuple[object, ...], _Base] = {}
        self._known_families: set[str] = set()
        self._created_bases: set[str] = set()
        self._source_types: dict[str, str] = {}
        for rule in table.rules:
            self._source_types[rule.source] = rule.source_type
            self._created_bases.add(rule.source)
            if rule.source.endswith("_total"):
                self._created_bases.add(rule.source[:-6])
            if rule.target not in METRICS_BY_NAME:
                raise ValueError(f"rule for {rule.source}: unknown target {rule.target}")
            self._known_families.add(rule.source)
        self._by_sample = table_plans(table)

    @property
    def dropped_labels(self) -> set[str]:
        """Upstream label names dropped because the schema has no place for them."""
        return self._mapper.dropped_labels

    def reset(self) -> None:
        """Forget what was compiled. ``keys`` is replaced, not cleared: a
        :class:`~fleetwatch.exporters.normalize.Normalized` handed out earlier keeps its
        keys."""
        self.keys = {}
        self._pool = {}
        self._sets = {}
        self._blocks = {}
        self._plans = {}
        self._bases = {}
        self._bounds = {}
        self._names = set()
        self._seen = {}
        self._type_names = {}
        self._owner.clear()
        self._shared.clear()
        self.mean_only.clear()

    def begin(self) -> None:
        """Start a compiling pass (one exposition): the mappings cached on blocks are
        made again (their runtime labels: the context learns runtimes between passes,
        e.g. of the models a pass deferred); within a pass, a model's runtime is read
        once."""
        self._mapper.begin()
        if self._bases:
            self._bases = {}
        for block in self._blocks.values():
            if block.maps:
                block.maps = {}

    def forget_compiling_caches(self) -> None:
        """Drop the caches that only compiling reads (label blocks, mappings): they pay
        within one exposition, whose series share blocks; the next new series mostly
        bring new blocks (new models)."""
        if self._blocks or self._plans:
            self._blocks = {}
            self._plans = {}
            self._bases = {}
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
        self._owner = {p: o for p, o in self._owner.items() if p in prefixes}
        self._shared &= prefixes
        self._pool = {}
        self._sets = {}
        self._blocks = {}
        self._plans = {}
        self._bases = {}
        self._bounds = {}
        self._names = set()
        self._seen = {}
        self._type_names = {}

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
            return self._unused(name, meta, block.pairs)
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
                mapped = self._map(rule, plan, block)
            if mapped is _NO_MODEL:
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
            return Entry(unmapped_family=self._family_of(name, meta),
                         types_seen=self._types_read(name, meta))
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
                prefix = tname + _append_rendered(mapped.base, extra_text)
                if prefix not in keys:
                    keys[prefix] = (tname, self._shared_pairs(mapped.base_pairs + extra))
            elif extra or (plan.le_scaled and t_suffix == "_bucket"):
                tail: tuple[tuple[str, str], ...] = tuple(
                    p for p in mapped.tail if p[0] not in extra_names) + extra if extra \
                    else (("le", _scale_bound(labels["le"], rule.le_divide)),)
                prefix = tname + _append_labels(mapped.base, tail)
                if prefix not in keys:
                    keys[prefix] = (tname, self._shared_pairs(mapped.base_pairs + tail))
            else:  # the block's own le/quantile, if any (rendered with the mapping)
                prefix = tname + mapped.full
                if prefix not in keys:
                    keys[prefix] = (tname, mapped.full_pairs)
            if mean_count:
                mean_only = True
            if mapped.lossy or multi:
                if slots.canon is None:
                    slots.canon = name + block.canonical()
                self._track(prefix, slots.canon)
            if prefix in self._shared:
                slots.shared.append(Shared(plan.fam_idx, prefix, div, mul,
                                           rule.negative_is_nan, rule.priority))
            elif slot_scaled:
                slots.scaled.append(Scaled(plan.fam_idx, prefix, div, mul,
                                           rule.negative_is_nan))
            else:
                slots.direct.append(Direct(plan.fam_idx, prefix))
        if mean_only:
            self._note_mean_only(rule.target, plan.fam_idx, mapped.base_pairs, mapped.base)

    @property
    def sharing(self) -> bool:
        """Whether any normalized series is compiled as shared (fed by several)."""
        return bool(self._shared)

    def unshare(self, met: Mapping[str, set[str]]) -> set[str]:
        """The shared normalized series that one upstream series alone fed in the last
        exposition read (``met``: shared prefix → the canonical identities of the series
        read on it), no longer shared and owned by that series: their series must be
        compiled again, as alone (the other series are gone: a sum of one is that series,
        as a first scrape of this exposition compiles it)."""
        alone = {p for p, canons in met.items() if len(canons) == 1}
        for prefix in alone:
            self._shared.discard(prefix)
            self._owner[prefix] = next(iter(met[prefix]))
        return alone

    def _track(self, prefix: str, canon: str) -> None:
        """Upstream series ``canon`` lands on normalized series ``prefix`` through a
        mapping where series may meet (lossy, or a target sample two rules feed): the
        first is the prefix's owner; when another meets it, the prefix is shared and the
        owner, compiled as alone, goes to :attr:`stale`. Idempotent."""
        owner = self._owner.setdefault(prefix, canon)
        if owner != canon and prefix not in self._shared:
            self._shared.add(prefix)
            self.stale.add(owner)

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
            mapped = self._map(rule, plan, block)
        if mapped is _NO_MODEL:
            return None
        tname = plan.tname
        prefix = tname + mapped.full
        canon = ""
        if mapped.lossy or plan.multi:
            canon = name + block.canonical()
            self._track(prefix, canon)
        if prefix in self._shared:
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

    def _map(self, rule: Rule, plan: Plan, block: Block) -> Mapped:
        """The normalized labels of a label block under a rule (:data:`_NO_MODEL`: a
        per-model family's series without a model), cached per mapping signature in the
        block's ``maps``, which the callers read first (rules that map labels alike —
        same target labels, match, value map, drops, constants — share an answer; valid
        for one pass, see :meth:`begin`). Made by applying the
        signature's :class:`~.labelmaps.LabelPlan` for the block's label names (planned
        once per signature and names)."""
        labels = block.labels
        assert labels is not None
        vm_value = labels.get(plan.vm_label) if plan.vm_label is not None else None
        plan_key = (plan.sig, block.names, vm_value)
        lplan = self._plans.get(plan_key)
        if lplan is None and plan_key not in self._plans:
            lplan = self._plans[plan_key] = self._mapper.plan(rule, block.names, labels,
                                                               plan.keep)
        if lplan is None:
            block.maps[plan.sig] = _NO_MODEL
            return _NO_MODEL
        # the block mapped already under another signature with the same plan (plans
        # are shared by content, see LabelMapper.plan; the runtime default is the rule's)
        alike = lplan if rule.runtime is None else (lplan, rule.runtime)
        known: Mapped | None = block.maps.get(alike)
        if known is not None:
            block.maps[plan.sig] = known
            return known
        values = block.values
        rest = lplan.rest
        tail = None
        if rest is not None:  # blocks alike but for le/quantile share their base labels
            tail = block.tail  # the block's own le/quantile: made once for all its plans
            if tail is None or tail.fmt != lplan.tail_fmt or tail.idx != lplan.tail_idx:
                tail_pairs, tail_text = self._mapper.own_tail(lplan, values, block.escaped)
                pool = self._pool
                tail = block.tail = OwnTail(
                    fmt=lplan.tail_fmt, idx=lplan.tail_idx,
                    values=tuple(map(values.__getitem__, rest)),
                    pairs=tuple([pool.setdefault(p, p) for p in tail_pairs]),
                    text=tail_text, names=tuple(map(block.names.__getitem__, rest)))
            # its base labels: the rule's mapping, without le/quantile kept, of its other
            # labels, as a block of those alone maps (a summary's _count and _sum block
            # and its quantiles' blocks: made once for all)
            bkey = (plan.base_sig, tail.names, vm_value)
            bplan = self._plans.get(bkey)
            if bplan is None and bkey not in self._plans:
                bplan = self._plans[bkey] = self._mapper.plan(rule, tail.names, labels, ())
            base_key: tuple[object, ...] | None = (bplan or lplan, rule.runtime, tail.values)
        elif not lplan.tail_idx:
            base_key = (lplan, rule.runtime, values)
        else:  # a tail not the block's own (a constant le)
            base_key = None
        if base_key is not None:
            base = self._bases.get(base_key)
            if base is None:
                applied = self._mapper.apply(lplan, rule, values, block.escaped)
                base = self._bases[base_key] = _Base(self._shared_pairs(applied.base_pairs),
                                                     applied.base, applied.model)
            base_pairs, rendered, model_id = base.pairs, base.rendered, base.model
            if tail is not None:
                tail_out = tail.pairs
                full = (rendered[:-1] + "," if rendered else "{") + tail.text
                full_pairs = base_pairs + tail_out
            else:
                tail_out, full, full_pairs = (), rendered, base_pairs
        else:
            applied = self._mapper.apply(lplan, rule, values, block.escaped)
            base_pairs = self._shared_pairs(applied.base_pairs)
            rendered, model_id, full = applied.base, applied.model, applied.full
            pool = self._pool
            tail_out = tuple([pool.setdefault(p, p) for p in applied.tail])
            full_pairs = base_pairs + tail_out
        mapped = Mapped(tail_out, base_pairs, rendered, lplan.lossy, model_id, full_pairs,
                        full)
        block.maps[plan.sig] = block.maps[alike] = mapped
        return mapped

    def _shared_pairs(self, pairs: LabelPairs) -> LabelPairs:
        """``pairs`` as a tuple shared with every equal label set compiled before (the
        keys of one model's series then cost one tuple, not one each; the pairs inside
        are not pooled: most label sets are one model's, and pooling their pairs cost
        more time than the memory it saved)."""
        return self._sets.setdefault(pairs, pairs)

    def _unused(self, name: str, meta: Metadata, pairs: LabelPairs) -> Entry:
        """The entry of a sample name no rule reads: ignored, invalid or unmapped."""
        if name.endswith(_IGNORED_SUFFIXES) and name[:-8] in self._created_bases:
            return NOT_DATA  # prometheus_client's _created samples
        fam = self._family_of(name, meta)
        seen = self._types_read(name, meta)
        if fam in self._source_types:
            typ = self._source_types[fam]
            if name[len(fam):] in SUFFIXES[typ]:
                return Entry(types_seen=seen)  # a sample of a known family no rule uses
            return Entry(error=f"{name} is not a sample of {typ} family {fam} "
                               f"(expected suffixes {', '.join(SUFFIXES[typ])})",
                         types_seen=seen)
        declared = meta.types.get(fam)
        if not fits_type(name, fam, declared, pairs):
            # passed through, it would make a Prometheus reject the scrape
            return Entry(error=f"{name} does not belong to {declared} family {fam}",
                         reason=TYPE_MISMATCH, unmapped_family=fam, ptype=declared,
                         types_seen=seen)
        return Entry(unmapped_family=fam, ptype=declared, types_seen=seen)

    def _note_mean_only(self, target: str, fam_idx: int, base_pairs: LabelPairs,
                        base_labels: str) -> None:
        """A mean-only histogram: its _count/+Inf bucket stand only beside a _sum."""
        inf = target + "_bucket" + _append_rendered(base_labels, 'le="+Inf"')
        self.keys.setdefault(inf, (target + "_bucket", (*base_pairs, ("le", "+Inf"))))
        self.mean_only[target + "_count" + base_labels] = MeanOnly(
            fam_idx, target + "_sum" + base_labels, inf)

    def _types_read(self, name: str,
                    meta: Metadata) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
        """The names :meth:`_family_of` may read the TYPE of for sample ``name``, and the
        TYPE declared so far of each (None: none): what an unmapped sample's entry
        depends on (:attr:`~.entry.Entry.types_seen`; one object per distinct answer, so
        that the normalizer checks the lines of one sample name once)."""
        names = self._type_names.get(name)
        if names is None:
            if len(self._seen) >= 100_000:
                self._seen, self._type_names = {}, {}
            found = [name]
            if name.endswith("_created"):
                found += [name[:-8], name[:-8] + "_total"]
            found += [name[:-len(suffix)] for suffix in _FAMILY_SUFFIXES
                      if name.endswith(suffix)]
            names = self._type_names[name] = tuple(found)
        seen = (names, tuple(map(meta.types.get, names)))
        return self._seen.setdefault(seen, seen)

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
        for suffix in _FAMILY_SUFFIXES:
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                if base in meta.types or base in self._known_families:
                    return base
        return name


#: The suffixes :meth:`SeriesCompiler._family_of` strips to find a sample's family.
_FAMILY_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_info")


def _append_labels(rendered: str, tail: Sequence[tuple[str, str]]) -> str:
    """Append label pairs to an already rendered label set."""
    if not tail:
        return rendered
    return _append_rendered(rendered, render_labels(tuple(tail))[1:-1])


def _append_rendered(rendered: str, more: str) -> str:
    """Append rendered label pairs (``a="b",…`` without braces) to a rendered label set
    (``{…}`` or ``""``)."""
    return rendered[:-1] + "," + more + "}" if rendered else "{" + more + "}"


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
