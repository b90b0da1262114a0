"""Refused groups: histograms whose buckets are not valid, and the series withdrawn.

A *group* is what is refused together (:attr:`~.entry.Entry.group`): a histogram's or a
summary's series, or the upstream series of one sum. The loop checks buckets as they
stream by (:class:`~.reading.Run`); a histogram whose count fell as the bound rose is
refused, and one not written as a single ascending run ending at ``+Inf`` (*unsure*) is
checked whole here, in a second pass over the body (:func:`~.validate.check_buckets`
gives the verdict). Every normalized series an upstream series of a refused group feeds
is then *withdrawn* from the families: served as absent, never half a histogram.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.parser import Metadata, iter_lines, split_sample_line
from fleetwatch.exporters.reading import Read
from fleetwatch.exporters.validate import BUCKETS_DECREASE, INF, check_buckets, prometheus_float

__all__ = ["check_histograms", "withdraw"]


def check_histograms(read: Read, text: str, cache: Mapping[str, Entry]) -> None:
    """Refuse (count, withdraw) the histograms whose buckets are not valid: those the
    streaming check of ``read`` saw decrease, and those it could not judge (not one
    ascending run ending at ``+Inf``) checked whole in ``text`` (the body read; ``cache``
    the compiled series by raw key)."""
    unsure = read.unsure
    unsure.update(g for g, run in read.runs.items() if run.le != INF)
    broken = {g: BUCKETS_DECREASE for g in read.decreasing - unsure}
    if unsure:
        for g, hb in _buckets_of(text, unsure, cache).items():
            reason = check_buckets(hb)
            if reason is not None:
                broken[g] = reason
    for group, reason in broken.items():
        read.refusals[reason] += 1
        read.examples.setdefault(reason, group[:200])
        read.withdraw.add(group)


def _buckets_of(text: str, groups: set[str],
                cache: Mapping[str, Entry]) -> dict[str, list[tuple[float, float]]]:
    """``(le, value)`` of every valid bucket of the histograms ``groups`` in ``text``
    (slow path: a second pass, only for histograms not written one ascending run
    each)."""
    out: dict[str, list[tuple[float, float]]] = {g: [] for g in groups}
    for line, _lineno in iter_lines(text, Metadata()):
        split = split_sample_line(line)
        if isinstance(split, str):
            continue
        entry = cache.get(split[0])
        if entry is None or entry.le is None or entry.group not in out:
            continue
        value = prometheus_float(split[1])
        if value is not None and 0.0 <= value < INF:
            out[entry.group].append((entry.le, value))
    return {g: hb for g, hb in out.items() if hb}


def withdraw(entries: Iterable[Entry], families: list[dict[str, float | str]],
             groups: set[str]) -> None:
    """Remove from ``families`` every normalized series fed by one of ``entries`` (the
    compiled series) in ``groups`` (a refused histogram or summary whole, a sum one of
    whose parts was refused). Slow path: scans the compiled series, only in a scrape that
    refused a sample."""
    for entry in entries:
        if entry.group in groups:
            for direct in entry.direct:
                families[direct.family].pop(direct.prefix, None)
            for scaled in entry.scaled:
                families[scaled.family].pop(scaled.prefix, None)
            for shared in entry.shared:
                families[shared.family].pop(shared.prefix, None)
