"""A label block mapped under a rule: the normalized labels a compiled series gets.

A *mapping* (:class:`Mapped`) is what one rule makes of one label block
(:class:`~.labelblocks.Block`): the ``le``/``quantile`` pairs kept (the *tail*), the
other pairs (the *base*), both rendered, the model the block names and whether the rule
drops labels so that two blocks may map alike (*lossy*). A :class:`BlockMapper` makes
them for the compiler (:class:`~.compile.SeriesCompiler`): it plans each (mapping
signature, label names, value-map value) once (:class:`~.labelmaps.LabelPlan`), caches a
block's mapping on the block (``Block.maps``, by signature and by plan: rules that map
labels alike share it), and makes the base labels once for blocks alike but for their
``le``/``quantile`` (a histogram's buckets, a summary's quantiles). Label sets and tail
pairs are pooled, so that the keys of one model's series share one tuple.

The caches are the compiler's: valid for one compiling pass (:meth:`BlockMapper.begin`),
dropped with its other compiling caches (:meth:`BlockMapper.forget_plans`) and emptied
when it forgets what it compiled (:meth:`BlockMapper.clear`).
"""

from __future__ import annotations

from typing import NamedTuple

from fleetwatch.exporters.labelblocks import Block, OwnTail
from fleetwatch.exporters.labelmaps import LabelMapper, LabelPlan
from fleetwatch.exporters.parser import LabelPairs
from fleetwatch.exporters.plans import Plan
from fleetwatch.exporters.table import Rule, SourceTable, TargetContext

__all__ = ["WITHOUT_MODEL", "BlockMapper", "Mapped"]


class Mapped(NamedTuple):
    """A label block mapped under a rule."""

    tail: tuple[tuple[str, str], ...]  # the le/quantile pairs kept
    base_pairs: LabelPairs  # the other pairs
    base: str  # ``base_pairs`` rendered (``{…}`` or "")
    lossy: bool  # two blocks may map alike (labels dropped)
    model: tuple[str, str, str, str] | None  # (model, version, backend, runtime)
    full_pairs: LabelPairs  # base and tail pairs
    full: str  # ``full_pairs`` rendered


#: The mapping of a block that a per-model family cannot take (no model label); compared
#: by identity.
WITHOUT_MODEL = Mapped((), (), "", False, None, (), "")


class _Base(NamedTuple):
    """The base labels (no le/quantile) of blocks alike: pairs, rendered, model."""

    pairs: LabelPairs
    rendered: str
    model: tuple[str, str, str, str] | None


class BlockMapper:
    """Maps the label blocks of one target under the rules of one table (see the module
    docstring); ``dropped_labels`` names the upstream labels dropped because the schema
    has no place for them."""

    def __init__(self, table: SourceTable, ctx: TargetContext) -> None:
        self._mapper = LabelMapper(table, ctx)
        # label pairs and label sets shared by the keys (one model's series repeat them)
        self._pool: dict[tuple[str, str], tuple[str, str]] = {}
        self._sets: dict[LabelPairs, LabelPairs] = {}
        # (signature, label names, value-map value) → how they map (None: no model)
        self._plans: dict[tuple[int, tuple[str, ...], str | None], LabelPlan | None] = {}
        # (label plan, rule runtime, values) → (base pairs, rendered, model): the base
        # labels of blocks alike but for le/quantile (see map)
        self._bases: dict[tuple[object, ...], _Base] = {}

    @property
    def dropped_labels(self) -> set[str]:
        """Upstream label names dropped because the schema has no place for them."""
        return self._mapper.dropped_labels

    @property
    def planned(self) -> bool:
        """Whether any label plan is cached."""
        return bool(self._plans)

    def begin(self) -> None:
        """Start a compiling pass: the runtimes are read again and the base labels made
        again (the context learns runtimes between passes; the caller clears the
        mappings cached on its blocks)."""
        self._mapper.begin()
        if self._bases:
            self._bases = {}

    def forget_plans(self) -> None:
        """Drop the label plans and base labels (the pools are kept)."""
        self._plans = {}
        self._bases = {}

    def clear(self) -> None:
        """Drop every cache, the pools included."""
        self._pool = {}
        self._sets = {}
        self._plans = {}
        self._bases = {}

    def shared_pairs(self, pairs: LabelPairs) -> LabelPairs:
        """``pairs`` as a tuple shared with every equal label set mapped before (the
        keys of one model's series then cost one tuple, not one each; the pairs inside
        are not pooled: most label sets are one model's, and pooling their pairs cost
        more time than the memory it saved)."""
        return self._sets.setdefault(pairs, pairs)

    def map(self, rule: Rule, plan: Plan, block: Block) -> Mapped:
        """The normalized labels of a label block under a rule (:data:`WITHOUT_MODEL`: a
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
            block.maps[plan.sig] = WITHOUT_MODEL
            return WITHOUT_MODEL
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
                base = self._bases[base_key] = _Base(self.shared_pairs(applied.base_pairs),
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
            base_pairs = self.shared_pairs(applied.base_pairs)
            rendered, model_id, full = applied.base, applied.model, applied.full
            pool = self._pool
            tail_out = tuple([pool.setdefault(p, p) for p in applied.tail])
            full_pairs = base_pairs + tail_out
        mapped = Mapped(tail_out, base_pairs, rendered, lplan.lossy, model_id, full_pairs,
                        full)
        block.maps[plan.sig] = block.maps[alike] = mapped
        return mapped
