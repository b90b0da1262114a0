"""What changed between two revisions of the governed files, classified by change class.

The registry, placement and quota documents are diffed *after* validation, field by field
(pydantic's ``model_dump``: every field with its default filled in, so writing a default
out is no change). Each differing leaf is a :class:`FieldChange` with a dotted path:

* registry entries, keyed by ``name`` (``name@version`` for an entry of one version):
  ``owner``, ``latency_tier``, ``declared.engine_version``, … (a list, e.g. a warm-up's
  inputs, is one leaf);
* placement: ``placement.<gpu_uuid>.<model@version>.instances`` (``present`` for a model
  placed on or taken off a GPU);
* quotas: ``quota.<team>.<resource>`` and ``quota.<team>.models.<model>.<resource>``.

Each path is put in the first class of :data:`CHANGE_CLASSES` whose patterns match it
(``fnmatch`` globs), so the table, not code, says what a field is. The fields of one
subject and class make one :class:`Change` with the id ``CLASS:SUBJECT``, which approval
records name. A registry entry added or removed is one change (``model_added``,
``model_removed``) rather than a change of each of its fields.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fleetwatch.gpu.quota import Quotas
from fleetwatch.labels.placement import GPUPlacement
from fleetwatch.labels.registry import ModelEntry, Registry

__all__ = ["CHANGE_CLASSES", "MODEL_ADDED", "MODEL_REMOVED", "Change", "ChangeClass",
           "FieldChange", "classify", "diff_governed", "group"]


@dataclass(frozen=True, slots=True)
class ChangeClass:
    """One class of change: its ``name`` (the id's prefix and the policy's key), what it
    means for a reader, and the field-path globs that belong to it."""

    name: str
    meaning: str
    fields: tuple[str, ...]


MODEL_ADDED, MODEL_REMOVED = "model_added", "model_removed"

#: The change classes, first match wins (``other`` catches the rest).
CHANGE_CLASSES: tuple[ChangeClass, ...] = (
    ChangeClass(MODEL_ADDED, "a model registered", ()),
    ChangeClass(MODEL_REMOVED, "a model's registration removed", ()),
    ChangeClass("owner", "owner, on-call or team", ("owner", "oncall", "team")),
    ChangeClass("tier", "latency tier", ("latency_tier",)),
    ChangeClass("engine_swap", "declared engine version", ("declared.engine_version",)),
    ChangeClass("quantization", "quantization", ("quantization", "declared.quantization")),
    ChangeClass("model_version", "declared model version", ("declared.model_version",)),
    ChangeClass("placement", "placement on GPUs, instance groups",
                ("placement.*", "declared.instance_groups", "declared.instance_groups.*")),
    ChangeClass("quota", "team quota", ("quota.*",)),
    ChangeClass("other", "any other field", ("*",)),
)
CLASS_NAMES = tuple(c.name for c in CHANGE_CLASSES)


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One leaf that differs: ``subject`` (model, team), dotted ``path``, ``old`` and
    ``new`` as text (None: absent on that side), and the model's ``owner`` (None for a
    subject that is not a model)."""

    subject: str
    path: str
    old: str | None
    new: str | None
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """The fields of one subject in one class: :attr:`id` ``CLASS:SUBJECT``."""

    change_class: str
    subject: str
    fields: tuple[FieldChange, ...]
    owner: str | None

    @property
    def id(self) -> str:
        """The change's id, ``CLASS:SUBJECT``, which approval records name."""
        return f"{self.change_class}:{self.subject}"

    def describe(self) -> str:
        """One line: each field's ``path old → new`` (``-`` for absent)."""
        return "; ".join(f"{f.path} {f.old if f.old is not None else '-'} → "
                         f"{f.new if f.new is not None else '-'}" for f in self.fields)


def classify(path: str) -> str:
    """The change class of a field path (:data:`CHANGE_CLASSES`, first match)."""
    for c in CHANGE_CLASSES:
        if any(fnmatch.fnmatchcase(path, p) for p in c.fields):
            return c.name
    return "other"


def _leaves(value: object, prefix: str = "") -> dict[str, str]:
    """Dotted path → text of every leaf of a dumped document (lists are leaves).

    A ``None`` leaf (an optional field not set, e.g. a key a ``declared:`` block does not
    declare, or the block itself) is left out: not set and absent are the same, so adding
    a ``declared:`` block changes only the keys it declares."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {} if value is None else {prefix: str(value)}


def _diff_leaves(subject: str, old: Mapping[str, str], new: Mapping[str, str],
                 owner: str | None, prefix: str = "") -> list[FieldChange]:
    return [FieldChange(subject, prefix + k, old.get(k), new.get(k), owner)
            for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def _entry_key(e: ModelEntry) -> str:
    return e.name if e.version is None else f"{e.name}@{e.version}"


def diff_registries(old: Registry, new: Registry) -> list[FieldChange]:
    """The registry's field changes; an entry added or removed is one ``present`` leaf."""
    olds = {_entry_key(e): e for e in old.entries}
    news = {_entry_key(e): e for e in new.entries}
    out: list[FieldChange] = []
    for key in sorted(set(olds) | set(news)):
        o, n = olds.get(key), news.get(key)
        either = n or o
        owner = either.owner if either else None
        if o is None or n is None:
            out.append(FieldChange(key, "present", None if o is None else "true",
                                   None if n is None else "true", owner))
            continue
        out += _diff_leaves(key, _leaves(o.model_dump()), _leaves(n.model_dump()), owner)
    return out


def _placement_leaves(gpus: Sequence[GPUPlacement]) -> dict[str, dict[str, str]]:
    """model@version → leaf path → text."""
    out: dict[str, dict[str, str]] = {}
    for g in gpus:
        if g.memory_bytes is not None:
            out.setdefault(f"gpu {g.gpu_uuid}", {})[
                f"placement.{g.gpu_uuid}.memory_bytes"] = str(g.memory_bytes)
        for m in g.models:
            key = f"{m.model}@{m.model_version}" if m.model_version else m.model
            leaves = out.setdefault(key, {})
            leaves[f"placement.{g.gpu_uuid}.{key}.present"] = "true"
            leaves[f"placement.{g.gpu_uuid}.{key}.instances"] = str(m.instances)
    return out


def diff_placements(old: Sequence[GPUPlacement], new: Sequence[GPUPlacement],
                    registry: Registry) -> list[FieldChange]:
    """The placement's changes, one subject per placed model (owner from ``registry``)."""
    o, n = _placement_leaves(old), _placement_leaves(new)
    out: list[FieldChange] = []
    for key in sorted(set(o) | set(n)):
        model, _, version = key.partition("@")
        entry = registry.lookup(model, version) if not key.startswith("gpu ") else None
        out += _diff_leaves(key, o.get(key, {}), n.get(key, {}),
                            entry.owner if entry else None)
    return out


def diff_quotas(old: Quotas | None, new: Quotas | None) -> list[FieldChange]:
    """The quota file's changes, one subject per team (a team added: every leaf new)."""
    o = {t: _leaves(q.model_dump()) for t, q in (old.teams if old else {}).items()}
    n = {t: _leaves(q.model_dump()) for t, q in (new.teams if new else {}).items()}
    out: list[FieldChange] = []
    for team in sorted(set(o) | set(n)):
        out += _diff_leaves(team, o.get(team, {}), n.get(team, {}), None, f"quota.{team}.")
    return out


def group(fields: Iterable[FieldChange]) -> list[Change]:
    """Field changes grouped by (class, subject), in the table's order, then by subject."""
    by: dict[tuple[str, str], list[FieldChange]] = {}
    for f in fields:
        if f.path == "present":
            cls = MODEL_ADDED if f.old is None else MODEL_REMOVED
        else:
            cls = classify(f.path)
        by.setdefault((cls, f.subject), []).append(f)
    order = {name: i for i, name in enumerate(CLASS_NAMES)}
    return [Change(cls, subject, tuple(fs), fs[0].owner)
            for (cls, subject), fs in sorted(by.items(),
                                             key=lambda kv: (order[kv[0][0]], kv[0][1]))]


def diff_governed(old: Registry, new: Registry,
                  placement: tuple[Sequence[GPUPlacement], Sequence[GPUPlacement]] = ((), ()),
                  quotas: tuple[Quotas | None, Quotas | None] = (None, None)) -> list[Change]:
    """Every change between two revisions of the governed files, grouped (:func:`group`)."""
    fields = diff_registries(old, new)
    fields += diff_placements(placement[0], placement[1], new)
    fields += diff_quotas(*quotas)
    return group(fields)
