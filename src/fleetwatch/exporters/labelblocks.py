"""Label blocks read once: the compiler's cache of what a ``{a="b",…}`` text says.

Upstream series share label blocks (a Triton model's 48 series carry 10 distinct blocks:
the model's, its four failure reasons, its five quantiles), so the compiler
(:mod:`.compile`) reads each distinct block once into a :class:`Block` — the strict parse
(:func:`~.parser.parse_label_block`), the length bound, and, for series a rule maps, the
canonical spelling of ``le``/``quantile`` and the sorted renderings that name the upstream
series and its histogram. The cache is the compiler's, bounded with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from fleetwatch.exporters.parser import (
    ExpositionError,
    LabelPairs,
    format_value,
    parse_label_block,
    parse_value,
)
from fleetwatch.exporters.validate import BAD_LE, BAD_QUANTILE
from fleetwatch.labels.text import escape_label_value


class Special(NamedTuple):
    """An invalid ``le`` or ``quantile`` label: the message and the invalid-sample
    reason (:mod:`.validate`)."""

    message: str
    reason: str


class OwnTail(NamedTuple):
    """A block's own ``le``/``quantile`` as the plans that keep them render it: the
    plan's ``tail_fmt`` and ``tail_idx`` it was made for, the block's other values and
    their label names, the tail pairs and the tail rendered (see
    :meth:`~.blockmaps.BlockMapper.map`)."""

    fmt: str
    idx: tuple[int, ...]
    values: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    text: str
    names: tuple[str, ...]


@dataclass(slots=True)
class Block:
    """What one label block says. ``error``: the block cannot be read (the parser's
    message); ``too_long``: a value longer than the bound (the message). The rest is
    made on first use by a mapped series (:meth:`mapped`): ``labels`` with ``le`` and
    ``quantile`` canonically spelled (``+inf`` → ``+Inf``, ``1`` → ``1.0``), or
    ``special`` (:class:`Special`) when one of them is invalid; :meth:`canonical` the
    labels sorted and rendered, :meth:`grouping` the same without ``le``/``quantile``
    (made on first use: most series need neither, or only one); ``names`` and
    ``values`` the keys and values of ``labels``, ``escaped`` the values escaped for the
    text format (what :mod:`.labelmaps` plans and applies); ``maps`` the compiler's
    mappings of the block by mapping signature and by (label plan, rule runtime), and
    ``tail`` its own ``le``/``quantile`` as the plans that keep them render it
    (:class:`OwnTail`)."""

    pairs: LabelPairs = ()
    error: str | None = None
    too_long: str | None = None
    labels: dict[str, str] | None = None
    special: Special | None = None
    canon: str | None = None
    group: str | None = None
    names: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    escaped: tuple[str, ...] = ()
    maps: dict[object, Any] = field(default_factory=dict)
    tail: OwnTail | None = None

    def mapped(self, bounds: dict[tuple[str, str], str] | None = None) -> Block:
        """Fill the fields a mapped series needs (once); returns ``self``. ``bounds``:
        the canonical spellings of valid ``le``/``quantile`` values met so far, by
        (label, value as written), read and extended (blocks repeat a few bounds)."""
        if self.labels is not None or self.special is not None:
            return self
        labels = dict(self.pairs)
        for special, reason in (("le", BAD_LE), ("quantile", BAD_QUANTILE)):
            if special in labels:  # canonical spelling: "+inf"/"Inf" → "+Inf", "1" → "1.0"
                raw = labels[special]
                known = bounds.get((special, raw)) if bounds is not None else None
                if known is not None:
                    labels[special] = known
                    continue
                try:
                    bound = parse_value(labels[special])
                except ExpositionError:
                    bound = math.nan
                if bound != bound or (special == "quantile" and not 0.0 <= bound <= 1.0):
                    self.special = Special(f"invalid {special} label {labels[special]!r}",
                                           reason)
                    return self
                labels[special] = format_value(bound)
                if bounds is not None:
                    bounds[special, raw] = labels[special]
        self.labels = labels
        self.names = tuple(labels)
        self.values = values = tuple(labels.values())
        joined = "".join(values)  # most blocks have nothing to escape: one scan each
        self.escaped = tuple([escape_label_value(v) for v in values]) if (
            "\\" in joined or '"' in joined or "\n" in joined) else values
        return self

    def canonical(self) -> str:
        """The labels (of a mapped block) sorted and rendered: with the sample name, the
        upstream series' identity whatever its spelling."""
        if self.canon is None:
            self.canon = self._sorted(())
            if "le" not in self.names and "quantile" not in self.names:
                self.group = self.canon
        return self.canon

    def grouping(self) -> str:
        """:meth:`canonical` without ``le``/``quantile``: with the family name, the
        histogram or summary a sample belongs to."""
        if self.group is None:
            self.group = self._sorted(("le", "quantile"))
            if "le" not in self.names and "quantile" not in self.names:
                self.canon = self.group
        return self.group

    def _sorted(self, without: tuple[str, ...]) -> str:
        """The labels but ``without`` sorted by name and rendered (what
        :func:`~fleetwatch.labels.text.render_labels` writes), with the format of these
        label names (:func:`_sorted_format`) and the values escaped in :meth:`mapped`."""
        fmt, idx = _sorted_format(self.names, without)
        return fmt % tuple(map(self.escaped.__getitem__, idx))


#: (label names, names left out) → :func:`_sorted_format` (bounded: names come from
#: upstream; a Triton or vLLM exposition has a few dozen shapes).
_SORTED: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, tuple[int, ...]]] = {}


def _sorted_format(names: tuple[str, ...], without: tuple[str, ...]
                   ) -> tuple[str, tuple[int, ...]]:
    """A ``%`` format rendering the labels ``names`` but ``without`` sorted by name, and
    the positions of the values it takes (``("", ())`` when none is left)."""
    key = (names, without)
    known = _SORTED.get(key)
    if known is not None:
        return known
    idx = tuple(sorted((i for i, k in enumerate(names) if k not in without),
                       key=names.__getitem__))
    fmt = "{" + ",".join(f'{names[i]}="%s"' for i in idx) + "}" if idx else ""
    if len(_SORTED) < 10_000:
        _SORTED[key] = (fmt, idx)
    return fmt, idx


def read_block(block: str, limit: int) -> Block:
    """Read a label block (``""`` for none, else ``{…}``) under the value-length bound
    ``limit``. Never raises: a bad block is a :class:`Block` with ``error``."""
    if not block:
        return Block()
    try:
        pairs = parse_label_block(block)
    except ExpositionError as exc:
        return Block(error=str(exc))
    if len(block) > limit:  # else no value can be longer
        for k, v in pairs:
            if len(v) > limit:
                return Block(pairs, too_long=f"label {k} value longer than {limit} characters")
    return Block(pairs)
