"""The normalized state of one upstream exposition (:class:`Normalized`), what
:class:`~fleetwatch.exporters.normalize.Normalizer` returns and every consumer reads (the
renderer, the SLO decoder, the sidecar's readiness and GPU facts)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleetwatch.exporters.parser import Metadata
from fleetwatch.exporters.snapshot import SeriesKey


def value_of(v: float | str) -> float:
    """A normalized sample value as a float (values copied unscaled stay upstream text)."""
    return v if isinstance(v, float) else float(v)


@dataclass
class Normalized:
    """The normalized state of one upstream exposition.

    ``families[i]`` maps a rendered series prefix (``name{labels}``) to its value for
    family ``METRICS[i]``: a float, or the upstream's own number text when the value was
    copied unscaled (use :func:`value_of`). ``models`` are the
    ``(model, model_version, backend, runtime)`` seen; ``unmapped`` the upstream family
    names no rule knows; ``meta.invalid`` the skipped lines; ``passthrough`` the sample
    lines of unmapped families by family (only with pass-through on);
    ``invalid_samples`` the samples refused by reason (:mod:`.validate`), with
    ``invalid_examples`` one ``series: why`` per reason; ``refused`` ``(reason, message)``
    when a :class:`~.validate.Limits` bound refused the whole exposition (``families``
    are then empty); ``passthrough_types`` the TYPE each passed-through family is served
    with (the one declared before its first line: a TYPE after samples is not served).
    """

    families: list[dict[str, float | str]]
    models: set[tuple[str, str, str, str]]
    unmapped: set[str]
    meta: Metadata
    passthrough: dict[str, list[str]] = field(default_factory=dict)
    keys: Mapping[str, SeriesKey] = field(default_factory=dict)
    invalid_samples: Counter[str] = field(default_factory=Counter)
    invalid_examples: dict[str, str] = field(default_factory=dict)
    passthrough_types: dict[str, str | None] = field(default_factory=dict)
    refused: tuple[str, str] | None = None
    #: ``lines[i]``: family ``METRICS[i]``'s series as output lines (``prefix value``),
    #: in :attr:`families` order, made by the normalizer's loop; None: render the dicts.
    lines: list[list[str]] | None = None
    #: Models whose series were left out, their runtime about to be learned
    #: (``TargetContext.defer``): normalize the exposition again once it is.
    deferred: set[str] = field(default_factory=set)
    #: ``numbers[i]``: family ``METRICS[i]``'s values as floats, in :attr:`families`
    #: order (what :func:`value_of` gives; the normalizer parsed them already), made by
    #: the normalizer's loop; None: read the dict (the family was changed after the loop).
    numbers: list[list[float] | None] | None = None

    @property
    def series_count(self) -> int:
        return sum(len(f) for f in self.families)

    def key(self, prefix: str) -> SeriesKey:
        """The typed :data:`~fleetwatch.exporters.snapshot.SeriesKey` of a series prefix of
        :attr:`families` (sample name and label pairs, values unescaped), as the
        normalizer compiled it (no parsing). Raises ``KeyError`` for a prefix that is not
        a series of this state."""
        return self.keys[prefix]

    def samples(self) -> Iterable[tuple[str, float]]:
        """Yield ``(series_prefix, value)`` for every normalized sample, schema order."""
        for fam in self.families:
            for prefix, v in fam.items():
                yield prefix, value_of(v)
