"""The normalizer's cache of compiled series, and what it keeps beside them.

The *cache* maps each raw upstream series key (``name{labels}`` as the upstream wrote it)
to its compiled :class:`~.entry.Entry`: label sets repeat on every scrape, so a steady
line costs one dict lookup. Each entry with a model carries that model's *index* in a
:class:`ModelIndex` (``Entry.mi``), so that the loop marks the models it sees in a
``bytearray`` rather than a set. When the exposition stops carrying series (label or
model-name churn), the entries it no longer *carries* are evicted one by one
(:func:`carried`), and the model indexes are numbered again from the entries kept.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.parser import Metadata, iter_lines, split_sample_line

__all__ = ["Model", "ModelIndex", "carried"]

#: A series' model as the schema labels it: (model, version, backend, runtime).
Model = tuple[str, str, str, str]


class ModelIndex:
    """Each model met so far numbered from 1 (0: no model), and the model of a number."""

    __slots__ = ("_index", "_table")

    def __init__(self) -> None:
        self._index: dict[Model, int] = {}  # model → Entry.mi
        self._table: list[Model] = [("", "", "", "")]

    def __len__(self) -> int:
        return len(self._index)

    def of(self, model: Model) -> int:
        """The index of a model (Entry.mi; numbered at its first use)."""
        i = self._index.get(model)
        if i is None:
            i = self._index[model] = len(self._table)
            self._table.append(model)
        return i

    def clear(self) -> None:
        """Forget every model (the entries' indexes are numbered again)."""
        self._index.clear()
        del self._table[1:]

    def marked(self, marks: bytearray) -> set[Model]:
        """The models whose index is set in ``marks``."""
        table = self._table
        return {table[i] for i in range(1, len(table)) if marks[i]}


def carried(cache: Mapping[str, Entry], text: str) -> dict[str, Entry]:
    """The entries of ``cache`` (raw key → compiled series) whose series ``text`` (an
    exposition body) carries. Cost: one pass over the text."""
    kept: dict[str, Entry] = {}
    for line, _lineno in iter_lines(text, Metadata()):
        sp = line.rfind(" ")
        key = line[:sp]
        entry = cache.get(key)
        if entry is None:
            split = split_sample_line(line)
            if isinstance(split, str):
                continue
            key = split[0]
            entry = cache.get(key)
            if entry is None:
                continue
        kept[key] = entry
    return kept
