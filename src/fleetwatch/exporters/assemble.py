"""One exposition out of several parts, never a family or series twice.

``/metrics`` is made of parts: the normalized families, fleetwatch's own metrics, the SLO
engine's families and the upstream families passed through. :func:`assemble` merges them
in precedence order — :data:`PRECEDENCE`: normalized > self > SLO > passthrough — with the
check client_python's registry makes at registration (``Duplicated timeseries``), made at
merge time so it can be resolved instead of raised:

* a family whose name, or any of its sample names (``x_bucket``, ``x_total``, …), was
  already served by a part of another origin is **dropped whole** (the sidecar's
  ``process_*`` over a vLLM server's, passed through);
* a family of the same origin, name and type as one served already (the same upstream
  family passed through from two targets) is **merged**: its series not served yet are
  added, the rest dropped; a type mismatch drops it whole;
* a series written twice inside a part is kept once (the first).

Whatever is dropped is counted by origin in :attr:`Assembly.dropped` (series; a dropped
family without samples counts 1) for the sidecar's self-metric. The result is deterministic:
it depends only on the parts and their order. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fleetwatch.exporters.parser import (
    ExpositionError,
    render_labels,
    split_key,
    split_sample_line,
)

NORMALIZED = "normalized"
SELF = "self"
SLO = "slo"
PASSTHROUGH = "passthrough"

#: The origins of /metrics parts, highest precedence first.
PRECEDENCE = (NORMALIZED, SELF, SLO, PASSTHROUGH)

#: Sample-name suffixes a family of each type owns besides its own name.
_TYPE_SUFFIXES = {
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created"),
    "counter": ("_created",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


@dataclass
class Family:
    """One family of an exposition: ``name``, its ``type``/``help`` (``None`` when the
    source wrote no TYPE/HELP line) and its sample ``lines`` (``series value``, no
    newline). ``help`` is written as is (already escaped)."""

    name: str
    type: str | None
    help: str | None
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The family as exposition lines, newline-terminated ("" without any line)."""
        out = []
        if self.help is not None:
            out.append(f"# HELP {self.name} {self.help}")
        if self.type is not None:
            out.append(f"# TYPE {self.name} {self.type}")
        if not out and not self.lines:
            return ""
        out += self.lines
        out.append("")  # the last newline, in the same join (not a copy of the text)
        return "\n".join(out)


@dataclass
class Part:
    """The families of one origin (:data:`PRECEDENCE`).

    ``check_names=False``: the families' samples carry only the names their type gives
    (the normalized families), so sample lines are not read for names;
    ``check_series=False``: the part is known to hold no series twice (the normalized
    families, or a part :func:`assemble` merged already), so series are not compared one
    by one — only against a family of the same origin met again.
    """

    origin: str
    families: Sequence[Family]
    check_names: bool = True
    check_series: bool = True


@dataclass
class Assembly:
    """The merged ``families`` and the series ``dropped`` by origin."""

    families: list[Family]
    dropped: Counter[str]

    @property
    def text(self) -> str:
        """The merged exposition (text format 0.0.4)."""
        return "".join(f.text() for f in self.families)


def parse_families(text: str) -> list[Family]:
    """Split an exposition into families by its HELP/TYPE lines (as prometheus_client
    writes them: HELP, TYPE, then the samples). A sample before any HELP/TYPE line starts
    an untyped family named after it. Blank and other comment lines are left out."""
    out: list[Family] = []
    cur: Family | None = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, _, rest = line[2:].partition(" ")
            name, _, value = rest.partition(" ")
            if cur is None or cur.name != name or (kind == "HELP" and cur.help is not None) \
                    or (kind == "TYPE" and cur.type is not None) or cur.lines:
                cur = Family(name, None, None)
                out.append(cur)
            if kind == "HELP":
                cur.help = value
            else:
                cur.type = value
            continue
        if line.startswith("#"):
            continue
        if cur is None:
            cur = Family(_sample_name(line), None, None)
            out.append(cur)
        cur.lines.append(line)
    return out


def assemble(parts: Iterable[Part]) -> Assembly:
    """Merge ``parts`` in the order given (pass them in :data:`PRECEDENCE` order); see the
    module docstring for how clashes are resolved."""
    merger = Merger()
    for part in parts:
        merger.add(part)
    return Assembly(merger.families, merger.dropped)


#: Who serves a name already: sample/family name → (origin, output family).
Owners = dict[str, tuple[str, Family]]


class Merger:
    """:func:`assemble` one part at a time: ``add`` merges a part into what was merged so
    far and returns the families it added (in order). ``owners`` (copied) seeds the names
    served by parts merged elsewhere (a ``/metrics`` body assembled segment by segment,
    each segment cached: the families of ``owners`` are never changed, so seed only parts
    of origins that ``add`` will not be given)."""

    def __init__(self, owners: Owners | None = None) -> None:
        self.owners: Owners = dict(owners) if owners else {}
        self.families: list[Family] = []
        self.dropped: Counter[str] = Counter()
        self._series: dict[int, set[str]] = {}  # id(output family) → canonical series

    def add(self, part: Part) -> list[Family]:
        """Merge one part; the families it added to the output."""
        owner, series, dropped = self.owners, self._series, self.dropped
        added: list[Family] = []
        for fam in part.families:
            names = _names(fam, sample_names=part.check_names)
            clash = {id(owner[n][1]): owner[n] for n in names if n in owner}
            target: Family | None = None
            if clash:
                (origin, prev), *more = clash.values()
                if more or origin != part.origin or prev.name != fam.name \
                        or prev.type != fam.type:
                    dropped[part.origin] += max(len(fam.lines), 1)
                    continue
                target = prev
            if target is None:
                target = Family(fam.name, fam.type, fam.help)
                self.families.append(target)
                added.append(target)
                if not part.check_series:
                    target.lines = list(fam.lines)
                    for n in names:
                        owner[n] = (part.origin, target)
                    continue
                series[id(target)] = set()
            for n in names:
                owner.setdefault(n, (part.origin, target))
            seen = series.get(id(target))
            if seen is None:  # an unchecked family met again: index what it holds
                seen = series[id(target)] = {_canonical(line) for line in target.lines}
            for line in fam.lines:
                key = _canonical(line)
                if key in seen:
                    dropped[part.origin] += 1
                    continue
                seen.add(key)
                target.lines.append(line)
        return added


def claims(families: Iterable[Family], check_names: bool = False) -> set[str] | None:
    """Every name ``families`` take (see :class:`Merger`), or None when two of them
    would clash (then they are not one part that :func:`assemble` keeps whole)."""
    out: set[str] = set()
    for fam in families:
        names = _names(fam, sample_names=check_names)
        if not out.isdisjoint(names):
            return None
        out |= names
    return out


def owners_signature(owners: Owners) -> frozenset[tuple[str, str, str, str | None]]:
    """What decides how a later part merges given ``owners``: each name with its owner's
    origin, family name and type (a cache key for segments assembled after them)."""
    return frozenset((n, o, f.name, f.type) for n, (o, f) in owners.items())


def _names(fam: Family, sample_names: bool) -> set[str]:
    """Every name a family takes: its own, its type's sample names, its samples' names."""
    names = {fam.name}
    base = fam.name
    if fam.type == "counter" and base.endswith("_total"):
        base = base[:-6]
        names.add(base)
    names.update(base + s for s in _TYPE_SUFFIXES.get(fam.type or "", ()))
    if fam.type == "counter":
        names.add(base + "_total")
    if sample_names:
        names.update(_sample_name(line) for line in fam.lines)
    return names


def _sample_name(line: str) -> str:
    end = len(line)
    for ch in "{ ":
        i = line.find(ch)
        if i != -1:
            end = min(end, i)
    return line[:end]


def _canonical(line: str) -> str:
    """A sample line's series identity whatever its spelling (label order, spaces)."""
    split = split_sample_line(line)
    if isinstance(split, str):
        return line
    key = split[0]
    try:
        name, pairs = split_key(key)
    except ExpositionError:
        return key
    return name + render_labels(tuple(sorted(pairs)))
