"""A compiled upstream series: where its value goes and how the loop treats it.

:class:`~.compile.SeriesCompiler` compiles each distinct raw series key once into an
:class:`Entry`: its *slots* — :class:`Direct` (the value copied), :class:`Scaled`
(unit-converted), :class:`Shared` (a normalized series other upstream series may feed
too: summed or replaced by priority) — its value check, histogram group and model; the
normalizer's loop keeps in it the last accepted value and what the series emitted
(:class:`Emitted`). :data:`FAMILY_INDEX` numbers the normalized families.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from fleetwatch.exporters.validate import NO_CHECK
from fleetwatch.labels.schema import METRICS

#: Schema position of each normalized family (``Normalized.families`` index).
FAMILY_INDEX: Mapping[str, int] = {m.name: i for i, m in enumerate(METRICS)}

# Slots of a compiled series: where its value goes.


class Direct(NamedTuple):
    """A slot whose value is copied as is: the family (``METRICS`` index) and the
    normalized series prefix (``name{labels}``)."""

    family: int
    prefix: str


class Scaled(NamedTuple):
    """A slot whose value is unit-converted: ``value / divide * multiply``, a negative
    result read as NaN when ``negative_is_nan``."""

    family: int
    prefix: str
    divide: float
    multiply: float
    negative_is_nan: bool


class Shared(NamedTuple):
    """A slot that may meet other upstream series on one normalized series: converted as
    :class:`Scaled`, then summed with the series of the same ``priority`` or replaced by
    one of a lower priority number (see :mod:`.sharing`)."""

    family: int
    prefix: str
    divide: float
    multiply: float
    negative_is_nan: bool
    priority: int


class Emitted(NamedTuple):
    """What a series emits into one family per scrape."""

    prefix: str  # the normalized series prefix
    value: float | str  # the value: a float, or the upstream text when copied unscaled
    line: str  # the output line (``prefix value``)
    number: float  # the value as a float


class MeanOnly(NamedTuple):
    """A mean-only histogram's series (its ``_count`` and ``+Inf`` bucket stand only
    beside its ``_sum``)."""

    family: int
    sum_prefix: str
    inf_prefix: str


@dataclass(slots=True)
class Entry:
    """Compiled mapping of one raw upstream series key."""

    # The fields a series with slots is built with come first, in the order the
    # compiler passes them: keyword arguments are matched against the parameters in
    # field order, and every new series pays for that matching.
    direct: tuple[Direct, ...] = ()
    scaled: tuple[Scaled, ...] = ()
    model: tuple[str, str, str, str] | None = None  # (model, version, backend, runtime)
    canon: str = ""  # the upstream series' canonical identity (duplicates: last wins)
    check: int = NO_CHECK  # value check (validate.CUMULATIVE, validate.QUANTILE)
    le: float | None = None  # a histogram bucket's bound (checked with its siblings)
    group: str = ""  # withdrawn together on a refusal (a histogram/summary, a shared sum)
    # An error, an unmapped family or a sample no rule uses: no slot (the constructors of
    # an entry with slots pass False, and ``rare``, rather than derive them in a
    # __post_init__ that every new series would pay for).
    skip: bool = True
    rare: bool = False  # a bucket (le) or shared slots: the loop's slow branch
    shared: tuple[Shared, ...] = ()
    unmapped_family: str | None = None
    error: str | None = None
    reason: str | None = None  # with error: its invalid-sample reason (.validate)
    ptype: str | None = None  # an unmapped sample: the family TYPE it was checked under
    deferred: str | None = None  # left out, not cached: this model's runtime is coming
    # The loop's memory of the last accepted value (see normalize): its token, its
    # float, and what it emits per scrape (emit.accept).
    tok: str | None = None
    value: float = 0.0
    emit: Callable[[Any], object] = bool  # bool(x): emits nothing
    emitted: Any = None
    mi: int = 0  # the normalizer's index of ``model`` (0: none)
    # An entry decided by the TYPE lines read before its line (an unmapped sample's
    # family and TYPE): the names whose TYPE it read, and each TYPE (None: none then);
    # compiled again at a line where the exposition declares otherwise (the loop of
    # normalize.Normalizer._read).
    types_seen: tuple[tuple[str, ...], tuple[str | None, ...]] | None = None


#: The entry of every series that is not data (``_created`` samples): skipped, never
#: changed, so one object serves them all.
NOT_DATA = Entry()
