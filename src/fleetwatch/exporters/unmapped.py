"""Samples no rule maps: ignored, invalid, or unmapped with the family they belong to.

A sample name no rule of the table reads, or a series whose rules all pass it by (their
``match`` labels differ), is one of:

* **ignored** — prometheus_client's ``X_created`` sample of a family a rule reads
  (:data:`~.entry.NOT_DATA`);
* **invalid** — a sample of a family a rule reads whose suffix that family's type does
  not have (``X_foo`` of a histogram ``X``), or one that does not fit the TYPE declared
  for its family (:func:`~.validate.fits_type`: passed through, it would make a
  Prometheus reject the scrape);
* **unmapped** — counted by family (``unmapped_families``) and passed through if the
  target asks for it (:mod:`.passthrough`).

An unmapped sample's *family* is guessed from the exposition's TYPE lines read before it
(and the families the rules read): its name, or its name without a sample suffix
(``_bucket``, ``_sum``, …). So its entry depends on those TYPEs, and keeps the ones it
read (:attr:`~.entry.Entry.types_seen`); the normalizer holds it only at a line where
they are declared alike. :class:`UnmappedSamples` makes these entries for the compiler
(:class:`~.compile.SeriesCompiler`), bounded with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetwatch.exporters.entry import NOT_DATA, Entry
from fleetwatch.exporters.parser import LabelPairs, Metadata
from fleetwatch.exporters.table import SUFFIXES, Rule
from fleetwatch.exporters.validate import TYPE_MISMATCH, fits_type

__all__ = ["UnmappedSamples"]

_IGNORED_SUFFIXES = ("_created",)

#: The suffixes :meth:`UnmappedSamples.family_of` strips to find a sample's family.
_FAMILY_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_info")

#: Distinct :attr:`~.entry.Entry.types_seen` answers kept at most (then forgotten).
_MAX_SEEN = 100_000

#: The names a sample's family may be read from, and the TYPE declared so far of each.
TypesSeen = tuple[tuple[str, ...], tuple[str | None, ...]]


class UnmappedSamples:
    """The entries of the samples the rules ``rules`` (one table's) do not map (see the
    module docstring)."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self._known_families: set[str] = set()
        self._created_bases: set[str] = set()
        self._source_types: dict[str, str] = {}
        for rule in rules:
            self._source_types[rule.source] = rule.source_type
            self._created_bases.add(rule.source)
            if rule.source.endswith("_total"):
                self._created_bases.add(rule.source[:-6])
            self._known_families.add(rule.source)
        # each distinct Entry.types_seen, once, and per sample name the names it reads
        # (bounded: forgotten together at _MAX_SEEN)
        self._seen: dict[TypesSeen, TypesSeen] = {}
        self._type_names: dict[str, tuple[str, ...]] = {}

    def clear(self) -> None:
        """Forget the names read and the answers made."""
        self._seen = {}
        self._type_names = {}

    def unused(self, name: str, meta: Metadata, pairs: LabelPairs) -> Entry:
        """The entry of a sample name no rule reads (``meta``: the exposition's HELP/TYPE
        so far, ``pairs`` the series' labels): ignored, invalid or unmapped."""
        if name.endswith(_IGNORED_SUFFIXES) and name[:-8] in self._created_bases:
            return NOT_DATA  # prometheus_client's _created samples
        fam = self.family_of(name, meta)
        seen = self.types_read(name, meta)
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

    def unmatched(self, name: str, meta: Metadata) -> Entry:
        """The entry of a series whose sample rules read but whose labels none matched:
        unmapped, in the family its name guesses."""
        return Entry(unmapped_family=self.family_of(name, meta),
                     types_seen=self.types_read(name, meta))

    def types_read(self, name: str, meta: Metadata) -> TypesSeen:
        """The names :meth:`family_of` may read the TYPE of for sample ``name``, and the
        TYPE declared so far of each (None: none): what an unmapped sample's entry
        depends on (:attr:`~.entry.Entry.types_seen`; one object per distinct answer, so
        that the normalizer checks the lines of one sample name once)."""
        names = self._type_names.get(name)
        if names is None:
            if len(self._seen) >= _MAX_SEEN:
                self._seen, self._type_names = {}, {}
            found = [name]
            if name.endswith("_created"):
                found += [name[:-8], name[:-8] + "_total"]
            found += [name[:-len(suffix)] for suffix in _FAMILY_SUFFIXES
                      if name.endswith(suffix)]
            names = self._type_names[name] = tuple(found)
        seen = (names, tuple(map(meta.types.get, names)))
        return self._seen.setdefault(seen, seen)

    def family_of(self, name: str, meta: Metadata) -> str:
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
