"""Label mapping under a rule, planned once per label-block shape and applied per block.

How a rule maps an upstream label set (renames, schema-allowed labels, drops, value maps,
constants, the ``backend``/``runtime`` labels, the target's label order) depends on the
label *names* only, except for a value map's source label (its value picks the labels
added) and the ``runtime`` label (read per model from the target context). So a
:class:`LabelMapper` plans the mapping once per (rule, label names, value-map value) —
a :class:`LabelPlan`: each output label a constant or the position of an upstream value,
and the label set's text a ``%`` format with the constants written in — and applying a
plan to a block (:meth:`LabelMapper.apply`) is a few C-level maps and one format. Blocks
that differ only by their own ``le``/``quantile`` share the rest (the tail is rendered
once per block, :meth:`LabelMapper.own_tail`). The compiler (:mod:`.compile`, through
:mod:`.blockmaps`) caches plans per table signature: a Triton exposition of 1000 models
has 35,000 (rule, block) mappings, 19 plans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from fleetwatch.exporters.table import Rule, SourceTable, TargetContext
from fleetwatch.labels.schema import (
    CORE_LABEL_ORDER,
    METRICS_BY_NAME,
    MetricDef,
    allowed_labels,
)
from fleetwatch.labels.text import LabelPairs, escape_label_value

log = logging.getLogger("fleetwatch.mapping")

#: Where an output label's value comes from: an ``int`` is a position in the block's
#: values (:attr:`~.labelblocks.Block.values`; one past the last: the model's runtime),
#: a ``str`` the value itself (a constant of the table, the rule or the context).
Source = int | str

#: Marks an upstream value while planning (NUL never occurs in a series that compiles).
_MARK = "\x00"


class Applied(NamedTuple):
    """A block's labels under a plan (:meth:`LabelMapper.apply`)."""

    tail: tuple[tuple[str, str], ...]  # the le/quantile pairs kept
    base_pairs: LabelPairs  # the other pairs
    base: str  # ``base_pairs`` rendered
    model: tuple[str, str, str, str] | None  # (model, version, backend, runtime)
    full: str  # base and tail rendered


@dataclass(frozen=True, slots=True, eq=False)
class LabelPlan:
    """How one rule maps the label blocks of one shape (see module docstring), compiled.

    A block's values, then its model's runtime, then ``consts`` form one sequence that
    ``*_idx`` index: ``base_names``/``base_idx`` are the normalized labels (target
    order, ``quantile``/``le`` excluded), ``tail_names``/``tail_idx`` the
    ``quantile``/``le`` kept (a bucket's, a quantile's), ``model_idx`` ``(model,
    model_version, backend, runtime)`` of a per-model family (None: not per model).
    ``fmt`` renders the base labels (``{a="…",…}``, ``""`` for none) and ``full_fmt``
    base and tail (``%`` formats: constants written in, ``%s`` the escaped values at
    ``fmt_idx``/``full_idx``); when the tail is the block's own ``quantile``/``le``
    (``rest``: the positions of the other values, which alone decide the base labels;
    else None), ``tail_fmt`` renders it after the base (``%s`` the escaped values at
    ``tail_idx``; see :meth:`LabelMapper.own_tail`). Compared and hashed by identity.
    ``runtime_of``: the source of the model whose runtime is the ``runtime`` label (None:
    no runtime is looked up); ``lossy``: whether the mapping loses information (other
    upstream series may land on the same normalized series)."""

    consts: tuple[str, ...]
    base_names: tuple[str, ...]
    base_idx: tuple[int, ...]
    tail_names: tuple[str, ...]
    tail_idx: tuple[int, ...]
    model_idx: tuple[int, ...] | None
    fmt: str
    fmt_idx: tuple[int, ...]
    full_fmt: str
    full_idx: tuple[int, ...]
    rest: tuple[int, ...] | None
    tail_fmt: str
    runtime_of: Source | None
    lossy: bool


class LabelMapper:
    """Plans and applies the label mapping of a table's rules for one target.

    ``dropped_labels`` names the upstream labels dropped because the schema has no place
    for them (each logged once, when first planned)."""

    def __init__(self, table: SourceTable, ctx: TargetContext) -> None:
        self.table = table
        self.ctx = ctx
        self.dropped_labels: set[str] = set()
        self._allowed: dict[str, frozenset[str]] = {}
        self._alike: dict[tuple[object, ...], LabelPlan] = {}  # plans by content
        self._runtimes: dict[str, str] = {}  # model → the context's runtime, this pass

    def begin(self) -> None:
        """Start a compiling pass (one exposition): the context's runtimes are read
        again, once per model in the pass (:meth:`runtime`)."""
        if self._runtimes:
            self._runtimes = {}

    def runtime(self, model: str, rule: Rule) -> str:
        """The ``runtime`` label of a model's series under a rule: the target context's
        (read once per model in a pass, see :meth:`begin`), else the rule's when the
        context does not know it (``unknown``)."""
        runtime = self._runtimes.get(model)
        if runtime is None:
            runtime = self._runtimes[model] = self.ctx.runtime_for(model)
        if runtime == "unknown" and rule.runtime:
            runtime = rule.runtime
        return runtime

    def plan(self, rule: Rule, names: tuple[str, ...], labels: Mapping[str, str],
             keep: tuple[str, ...]) -> LabelPlan | None:
        """The plan of ``rule`` for blocks with these label ``names`` (``labels``: one
        such block, read for the value map's source label only); None when a per-model
        family's series would have no ``model``. Of ``le``/``quantile`` only those in
        ``keep`` are kept."""
        marked = {k: f"{_MARK}{i}" for i, k in enumerate(names)}
        vmap = self.table.value_maps[rule.value_map] if rule.value_map else None
        if vmap is not None and vmap.source_label in labels:
            marked[vmap.source_label] = labels[vmap.source_label]
        out, lossy, runtime_of = self._map_labels(rule, marked, keep, len(names))
        tdef = METRICS_BY_NAME[rule.target]
        if tdef.per_model and "model" not in out:
            return None
        tail = tuple((k, _source(out.pop(k))) for k in ("quantile", "le") if k in out)
        base = tuple((k, _source(v)) for k, v in _ordered(out, tdef))
        model = (_source(out["model"]), _source(out.get("model_version", "")),
                 _source(out["backend"]), _source(out.get("runtime", "unknown"))) \
            if tdef.per_model else None
        consts: dict[str, int] = {}
        at = len(names) + 1  # the values, the runtime, then the constants

        def idx(src: Source) -> int:
            return src if isinstance(src, int) else consts.setdefault(src, at + len(consts))

        base_idx = tuple(idx(v) for _k, v in base)
        tail_idx = tuple(idx(v) for _k, v in tail)
        model_idx = None if model is None else tuple(idx(v) for v in model)
        fmt, fmt_idx = _format(base)
        full_fmt, full_idx = _format(base + tail)
        own_tail = bool(tail) and all(isinstance(v, int) for _k, v in tail)
        rest = tuple(i for i in range(len(names)) if i not in tail_idx) if own_tail else None
        tail_fmt = ",".join(f'{k}="%s"' for k, _ in tail) + "}"
        fields = (tuple(consts), tuple(k for k, _ in base), base_idx,
                  tuple(k for k, _ in tail), tail_idx, model_idx, fmt, fmt_idx,
                  full_fmt, full_idx, rest, tail_fmt,
                  None if runtime_of is None else _source(runtime_of), lossy)
        # Rules that map alike for these names (Triton: three of its counters) get one
        # plan object, so that the compiler maps a block once for all of them (bounded:
        # label names come from upstream).
        alike = self._alike.get(fields)
        if alike is None:
            alike = LabelPlan(*fields)
            if len(self._alike) < 10_000:
                self._alike[fields] = alike
        return alike

    def apply(self, plan: LabelPlan, rule: Rule, values: tuple[str, ...],
              escaped: tuple[str, ...]) -> Applied:
        """The labels of a block (its ``values`` and the same ``escaped``) under a plan of
        ``rule``."""
        runtime_of = plan.runtime_of
        if runtime_of is None:
            runtime = ""
        else:
            runtime = self.runtime(values[runtime_of] if isinstance(runtime_of, int)
                                   else runtime_of, rule)
        vals = (*values, runtime, *plan.consts)
        esc = (*escaped, escape_label_value(runtime))
        get = vals.__getitem__
        base = tuple(zip(plan.base_names, map(get, plan.base_idx), strict=True))
        text = plan.fmt % tuple(map(esc.__getitem__, plan.fmt_idx))
        if plan.tail_idx:
            tail = tuple(zip(plan.tail_names, map(get, plan.tail_idx), strict=True))
            full = plan.full_fmt % tuple(map(esc.__getitem__, plan.full_idx))
        else:
            tail, full = (), text
        model_idx = plan.model_idx
        model = None if model_idx is None else tuple(map(get, model_idx))
        return Applied(tail, base, text, model, full)  # type: ignore[arg-type]  # 4 indexes

    @staticmethod
    def own_tail(plan: LabelPlan, values: tuple[str, ...], escaped: tuple[str, ...]
                 ) -> tuple[tuple[tuple[str, str], ...], str]:
        """``(tail pairs, tail rendered)`` of a block under a plan whose tail is the
        block's own (``plan.rest`` set): the pairs, and their text to append to the base
        labels without their closing brace (``quantile="0.5"}``); the same for every
        plan with this ``tail_fmt`` and ``tail_idx``. The base labels are
        :meth:`apply`'s, of any block equal at ``plan.rest``."""
        tail = tuple(zip(plan.tail_names, map(values.__getitem__, plan.tail_idx),
                         strict=True))
        return tail, plan.tail_fmt % tuple(map(escaped.__getitem__, plan.tail_idx))

    def _map_labels(self, rule: Rule, labels: dict[str, str], keep: tuple[str, ...],
                    runtime_at: int) -> tuple[dict[str, str], bool, str | None]:
        """The normalized labels of an upstream label set under ``rule`` (its values
        marked, see :meth:`plan`), whether the mapping is lossy, and the value of the
        model whose runtime is the ``runtime`` label (that label is the mark of
        position ``runtime_at``).

        Renamed labels (the table's renames) come first; other upstream labels are kept
        only when the schema allows them on the target metric and nothing renamed
        produced them already (an upstream ``model_version`` never overrides the one
        renamed from Triton's ``version``). Every other upstream label is dropped —
        series that then coincide are summed — and named once in a log line. Lossy: a
        dropped label, a value map. Of ``le`` and ``quantile`` only those in ``keep`` are
        kept (a bucket's, a quantile's).
        """
        renames = self.table.label_renames
        tdef = METRICS_BY_NAME[rule.target]
        allowed = self._allowed.get(rule.target)
        if allowed is None:
            allowed = self._allowed[rule.target] = frozenset(allowed_labels(tdef))
        consumed = {k for k, _ in rule.match}
        vmap = self.table.value_maps[rule.value_map] if rule.value_map else None
        if vmap is not None:
            consumed.add(vmap.source_label)
        out: dict[str, str] = {}
        newly_dropped: list[str] = []
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
                newly_dropped.append(k)
        if newly_dropped:  # one line per series compiled, naming every label it drops
            log.info("%s: dropping upstream label%s %s (not in the schema of %s); series "
                     "that differ only by them are summed", self.table.kind,
                     "s" if len(newly_dropped) > 1 else "",
                     ", ".join(map(repr, newly_dropped)), rule.target)
        for k in ("le", "quantile"):
            if k in labels:
                if k in keep:
                    out[k] = labels[k]
                else:
                    lossy = True
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
        runtime_of = None
        if tdef.per_model:
            if self.ctx.model_version is not None:
                out.setdefault("model_version", self.ctx.model_version)
            if "model" in out:
                runtime_of = out["model"]
                out["runtime"] = f"{_MARK}{runtime_at}"
        else:
            for k in ("model", "model_version", "runtime"):
                out.pop(k, None)
        out.update(self.ctx.extra_labels)
        return out, lossy, runtime_of


def _source(value: str) -> Source:
    """A planned label value: a marked upstream value's position, else the constant."""
    return int(value[1:]) if value[:1] == _MARK else value


def _format(labels: tuple[tuple[str, Source], ...]) -> tuple[str, tuple[int, ...]]:
    """The rendering of planned labels (:func:`~fleetwatch.labels.text.render_labels`)
    as a ``%`` format (constants escaped and written in, ``%s`` per value) and the
    positions of the values it takes."""
    if not labels:
        return "", ()
    parts: list[str] = []
    positions: list[int] = []
    for k, src in labels:
        if isinstance(src, int):
            parts.append(f'{k}="%s"')
            positions.append(src)
        else:
            parts.append(f'{k}="{escape_label_value(src)}"'.replace("%", "%%"))
    return "{" + ",".join(parts) + "}", tuple(positions)


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
