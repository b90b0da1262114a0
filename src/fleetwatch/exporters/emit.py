"""What a compiled series emits: its accepted value, per slot, into its families' lists.

The normalizer's loop keeps per normalized family (``METRICS`` index) one list of
:class:`~.entry.Emitted` (prefix, value, output line, number) that the series read in
this exposition appended to; the *appends* are those lists' bound ``append`` methods, one
per family, shared by every series. A series whose value token is the one it last
*accepted* emits what it emitted then (``entry.emit(entry.emitted)``, no parsing);
:func:`accept` takes a new token: it parses and checks the value and sets what the series
emits from now on. Direct slots keep the upstream's text when finite (NaN and ±Inf get
the canonical spelling); scaled ones are unit-converted floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from operator import itemgetter

from fleetwatch.exporters.entry import Emitted, Entry
from fleetwatch.exporters.parser import format_value
from fleetwatch.exporters.validate import INF

__all__ = ["LINE", "NUMBER", "PREFIX", "TRAILING", "VALUE", "Appends", "accept", "emit_all"]

#: Per family (``METRICS`` index), the ``append`` of the list its series emit into.
Appends = list[Callable[[Emitted], None]]

#: ``_emitted(Emitted, (prefix, value, line, number))``: an :class:`~.entry.Emitted`
#: made in C (a NamedTuple's own constructor is a Python function, paid per accepted
#: value)
_emitted = tuple.__new__
#: Fields of :class:`~.entry.Emitted`, read in C over a family's list (an ``itemgetter``
#: of the field's index: a NamedTuple's attribute goes through its class)
PREFIX, VALUE, LINE, NUMBER = (itemgetter(Emitted._fields.index(name))
                               for name in ("prefix", "value", "line", "number"))

#: What may end a sample line after its value (``str.rstrip`` set; never empty).
TRAILING = frozenset(" \t\r")


def accept(entry: Entry, tok: str, appends: Appends) -> str | float | None:
    """Take a series' new value token (one that is not its last accepted one): None
    when accepted — ``entry.tok``, ``.value``, ``.emit`` and ``.emitted`` are what the
    series emits from now on, into the lists of ``appends`` —, else what is wrong: a
    ``str`` (the token is not a number: the malformed-line message), or the ``float``
    refused by the entry's value check (:func:`~.validate.check_value` gives the reason).
    The entry is unchanged when the value is not accepted."""
    if tok[-1:] in TRAILING:  # a CR, or blanks after the value
        tok = tok.rstrip(" \t\r")
    if "_" in tok or not tok.isascii():  # Python's float takes "1_0", "١"
        return f"invalid sample value {tok!r}"
    try:
        value = float(tok)
    except ValueError:
        return f"invalid sample value {tok!r}"
    check = entry.check
    # refused: a cumulative value (check 1) outside [0, inf), a quantile
    # (check 2) negative or infinite (NaN is an empty summary's quantile)
    if check and not (0.0 <= value < INF) and (check == 1 or value == value):
        return value
    # what the series emits from now on (the two common cases here, no call)
    direct, scaled = entry.direct, entry.scaled
    if len(direct) == 1 and not scaled and value - value == 0:
        slot = direct[0]  # the upstream text, unscaled
        prefix = slot.prefix
        entry.emit = appends[slot.family]
        entry.emitted = _emitted(Emitted, (prefix, tok, f"{prefix} {tok}", value))
    elif len(scaled) == 1 and not direct:
        one = scaled[0]  # unit-converted
        v = value / one.divide * one.multiply
        if one.negative_is_nan and v < 0:
            v = math.nan
        prefix = one.prefix
        entry.emit = appends[one.family]
        entry.emitted = _emitted(Emitted, (prefix, v, f"{prefix} {v!r}" if v - v == 0
                                           else f"{prefix} {format_value(v)}", v))
    else:
        _emits(entry, tok, value, appends)
    entry.tok = tok
    entry.value = value
    return None


def _emits(entry: Entry, tok: str, value: float, appends: Appends) -> None:
    """Set what an accepted value of a series emits (``entry.emit(entry.emitted)``):
    per direct and scaled slot, an :class:`~.entry.Emitted` appended to its family's
    list. One slot: that list's ``append`` and its ``Emitted``; several: :func:`emit_all`
    and the tuple of the slots' ``Emitted``, in slot order (direct, then scaled); none
    (shared slots only): ``bool``, a no-op. (The two common cases, one direct slot with a
    finite value and one scaled slot alone, are made by :func:`accept` itself.)"""
    emits: list[Callable[[Emitted], None]] = []
    made: list[Emitted] = []
    if entry.direct:
        finite = value - value == 0
        text = tok if finite else format_value(value)
        val: float | str = tok if finite else value
        for slot in entry.direct:
            emits.append(appends[slot.family])
            made.append(Emitted(slot.prefix, val, f"{slot.prefix} {text}", value))
    for one in entry.scaled:
        v = value / one.divide * one.multiply
        if one.negative_is_nan and v < 0:
            v = math.nan
        emits.append(appends[one.family])
        made.append(Emitted(one.prefix, v, f"{one.prefix} {format_value(v)}", v))
    if len(made) == 1:
        entry.emit, entry.emitted = emits[0], made[0]
    elif not made:
        entry.emit, entry.emitted = bool, None
    else:
        entry.emit, entry.emitted = partial(emit_all, tuple(emits)), tuple(made)


def emit_all(emits: tuple[Callable[[Emitted], None], ...],
             emitted: tuple[Emitted, ...]) -> None:
    """Emit every slot of a series with several (see :func:`accept`): its ``emitted`` is
    then the tuple of what each slot emits, in slot order."""
    for emit, one in zip(emits, emitted, strict=True):
        emit(one)
