"""One read: what one pass of the normalizer's loop gathers from the lines it reads.

The loop (:meth:`~.normalize.Normalizer._read`) reads every line of an exposition, or only
the lines that changed since the last clean one, into a :class:`Read`: the compiled
series of each line read (*entries*), the models seen (*marks*, by the normalizer's model
index), the streaming check of each histogram's buckets (*runs*: bounds ascending as
upstreams write them; a histogram not written as one ascending run is *unsure*, checked
whole later), the normalized series of shared slots (*sums*, :mod:`.sharing`), the
passed-through lines (:mod:`.passthrough`), and what was refused: samples counted by
reason (*refusals*, with one *example* each), the *groups* (a histogram, a summary, a
sum) to *withdraw*, and the exposition itself when a :class:`~.validate.Limits` bound
refused it whole (*refused*: :func:`past_bound`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from fleetwatch.exporters.emit import TRAILING
from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.normalized import Normalized
from fleetwatch.exporters.parser import Metadata, format_value
from fleetwatch.exporters.passthrough import pass_through
from fleetwatch.exporters.sharing import Sum
from fleetwatch.exporters.validate import (
    BAD_VALUE,
    NORMALIZE_TIMEOUT,
    TOO_MANY_SERIES,
    TYPE_MISMATCH,
    Limits,
    check_value,
)
from fleetwatch.labels.schema import METRICS

__all__ = ["Found", "Read", "Run", "past_bound"]


@dataclass(slots=True)
class Run:
    """A histogram's last bucket read (bound and count): buckets are checked as they
    stream by, bounds ascending as upstreams write them."""

    le: float
    count: float


class Found(NamedTuple):
    """A sample line of a series not in the cache: its entry (None: deferred), raw key
    and value token."""

    entry: Entry | None
    key: str
    tok: str


@dataclass(slots=True)
class Read:
    """What one pass of the loop gathered from the lines it read: ``entries[i]`` the
    series of line ``i`` (None: not read, or not a sample of a cached series),
    ``marks[mi]`` set for each model seen, ``runs`` the streaming bucket check per
    histogram (``unsure``: histograms to check whole; ``decreasing``: a count fell as the
    bound rose), ``sums`` the normalized series of shared slots, ``withdraw`` the groups
    of refused samples; ``refused`` the state when a bound refused the exposition."""

    meta: Metadata
    entries: list[Entry | None]
    marks: bytearray
    sample_lines: int = 0
    unmapped: set[str] = field(default_factory=set)
    deferred: set[str] = field(default_factory=set)
    passthrough: dict[str, list[str]] = field(default_factory=dict)
    ptypes: dict[str, str | None] = field(default_factory=dict)
    sums: dict[str, Sum] = field(default_factory=dict)
    refusals: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    withdraw: set[str] = field(default_factory=set)
    fed: list[Entry] = field(default_factory=list)  # the series with shared slots read
    runs: dict[str, Run] = field(default_factory=dict)
    unsure: set[str] = field(default_factory=set)
    decreasing: set[str] = field(default_factory=set)
    refused: Normalized | None = None

    def skipped(self, entry: Entry, key: str, tok: str, lineno: int,
                passthrough: bool) -> None:
        """A line whose series has no slot: a refusal, a malformed series, an unmapped
        family (copied when ``passthrough``) or a sample no rule uses."""
        reason = entry.reason
        if reason is not None and (reason != TYPE_MISMATCH or passthrough):
            self.refusals[reason] += 1
            self.examples.setdefault(reason, f"{key[:200]}: {entry.error}")
        elif entry.error is not None and reason is None:
            self.meta.bad(lineno, entry.error, key)
        elif entry.unmapped_family is not None:
            self.unmapped.add(entry.unmapped_family)
            if passthrough:
                if tok[-1:] in TRAILING:
                    tok = tok.rstrip(" \t\r")
                problem = pass_through(entry, key, tok, self.passthrough, self.ptypes,
                                       self.meta.types)
                if problem is not None:
                    self.refusals[problem] += 1
                    self.examples.setdefault(problem, f"{key[:200]}: value {tok[:40]!r}")

    def refused_value(self, entry: Entry, key: str, wrong: str | float, lineno: int) -> None:
        """Record a value :func:`~.emit.accept` did not take: a malformed token (``str``:
        the line is recorded as invalid) or a number the series' check refuses (counted by
        reason; its histogram, summary or sum withdrawn). A series with shared slots is
        counted as read (``fed``) all the same."""
        if entry.shared:
            self.fed.append(entry)
        if isinstance(wrong, str):
            self.meta.bad(lineno, wrong, key)
            return
        reason = check_value(entry.check, wrong) or BAD_VALUE
        self.refusals[reason] += 1
        self.examples.setdefault(reason, f"{key[:200]}: {format_value(wrong)}")
        if entry.group:
            self.withdraw.add(entry.group)


def past_bound(limits: Limits, sample_lines: int, meta: Metadata) -> Normalized:
    """The state of an exposition refused whole by a bound of ``limits`` while it is read
    (no series; ``meta`` what was read): too many series (``sample_lines`` read so far at
    ``limits.max_series`` or more), else the time bound."""
    max_series = limits.max_series
    if sample_lines >= max_series:
        reason, message = TOO_MANY_SERIES, (f"more than {max_series} series in one "
                                            "exposition (scrape.max_series)")
    else:
        reason, message = NORMALIZE_TIMEOUT, ("normalizing took more than "
                                              f"{limits.max_seconds} s "
                                              "(scrape.normalize_timeout_seconds)")
    return Normalized(families=[{} for _ in METRICS], models=set(), unmapped=set(),
                      meta=meta, refused=(reason, message))
