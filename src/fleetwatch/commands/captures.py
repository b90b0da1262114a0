"""Capture files as the offline commands read them: bounded before they are read, and a
replay's captures checked to come from one server.

:func:`read_capture` refuses a file larger than
:data:`~fleetwatch.exporters.capture.MAX_CAPTURE_BYTES` from its size, before reading a
byte of it (the bound then holds for the text too: :func:`~fleetwatch.exporters.capture.
capture_text`), so a huge capture costs no memory. :func:`too_many_series` counts a
body's sample lines before it is normalized: the normalizer would refuse a body past
``scrape.max_series`` too, but only after compiling every series up to the bound (most
of a gigabyte at 250,000 series).

:class:`OneServer` follows a replay's captures in time order and refuses captures of two
servers interleaved, which the SLO engine would otherwise read as counter resets every
capture (events lost or counted twice, silently). Two signs, either enough:

* the processes' start times differ and one comes back: ``process_start_time_seconds``
  (the Prometheus client libraries' standard process metric, which vLLM and SGLang
  expose) reads A, then B, then A again — a restart moves it forward once, never back;
* the cumulative series say so: most of them fell at one capture (a reset) and at the
  next are back at or above the values they had before the fall. A restarted server's
  counters start again from zero; they cannot all overtake a whole past lifetime within
  one interval. Series that were 0 before the fall are not counted (they tell nothing).

Sources: the Prometheus client libraries' process collector
(``process_start_time_seconds``, "Start time of the process since unix epoch in
seconds"); Prometheus' counter semantics (a decrease is a reset).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from fleetwatch.exporters.capture import MAX_CAPTURE_BYTES, CaptureError, capture_text
from fleetwatch.labels.schema import METRICS

if TYPE_CHECKING:
    from fleetwatch.exporters.normalize import Normalized

__all__ = ["MIN_SERIES", "OneServer", "read_capture", "too_many_series"]

#: Cumulative series (non-zero before a fall) a reset pattern needs to be judged on.
MIN_SERIES = 10

_START = re.compile(r"^process_start_time_seconds(?:\{[^}\n]*\})?[ \t]+(\S+)", re.M)
_CUMULATIVE = [i for i, m in enumerate(METRICS) if m.type in ("counter", "histogram")]


def read_capture(path: Path, limit: int = MAX_CAPTURE_BYTES) -> str:
    """The text of the capture file ``path`` (gzip or plain UTF-8:
    :func:`~fleetwatch.exporters.capture.capture_text`), its size checked before it is
    read: a file of more than ``limit`` bytes is refused unread.

    Raises:
        CaptureError: the file is larger than ``limit`` bytes, or its bytes are refused.
        OSError: the file cannot be read (the caller names it).
    """
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise CaptureError(f"{size} bytes, more than the {limit} a capture may hold "
                               "(split it, or capture a smaller scrape)")
        raw = f.read(limit + 1)
    if len(raw) > limit:  # it grew while being read
        raise CaptureError(f"more than the {limit} bytes a capture may hold")
    return capture_text(raw, limit)


def too_many_series(text: str, max_series: int) -> str | None:
    """None, or the normalizer's refusal message (reason ``too_many_series``) when
    ``text`` has more than ``max_series`` sample lines (lines neither blank nor ``#``
    comments), counted without splitting the text while it has at most that many
    lines."""
    if text.count("\n") < max_series:
        return None
    samples = sum(1 for line in _LINE.finditer(text) if line.group(0)[:1] not in ("", "#"))
    if samples <= max_series:
        return None
    return f"more than {max_series} series in one exposition (scrape.max_series)"


_LINE = re.compile(r"^[^\n]*", re.M)


class _Seen(NamedTuple):
    """One capture as :class:`OneServer` keeps it: its ``name``, the process start time
    (None: not exposed) and its cumulative series' values by series prefix."""

    name: str
    start: float | None
    values: dict[str, float]


class OneServer:
    """Checks that a replay's captures, fed in time order (:meth:`check`), come from one
    server (the module doc says how)."""

    def __init__(self) -> None:
        self._starts: dict[float, str] = {}  # start time → the first capture with it
        self._last: _Seen | None = None
        self._before: _Seen | None = None

    def check(self, name: str, text: str, normalized: Normalized) -> str | None:
        """None, or why capture ``name`` (its ``text`` and ``normalized`` series) is
        another server's than the captures before it (a sentence naming them)."""
        found = _START.search(text)
        start: float | None = None
        if found:
            try:
                start = float(found.group(1))
            except ValueError:
                start = None
        seen = _Seen(name, start, _cumulative(normalized))
        last, before = self._last, self._before
        self._before, self._last = last, seen
        if start is not None and last is not None and last.start is not None \
                and start != last.start and start in self._starts:
            return (f"process_start_time_seconds is {start:.0f} again, as in "
                    f"{self._starts[start]}, after {last.start:.0f} in {last.name}: "
                    "captures of two servers interleaved (a restart never goes back)")
        if start is not None:
            self._starts.setdefault(start, name)
        if last is not None and before is not None and _back_above(before, last, seen):
            return (f"most counters fell in {last.name} and are back above their values of "
                    f"{before.name}: captures of two servers interleaved (a restarted "
                    "server's counters start again from zero)")
        return None


def _cumulative(n: Normalized) -> dict[str, float]:
    """The values of ``n``'s counter and histogram series by series prefix (text that is
    no number left out)."""
    out: dict[str, float] = {}
    for i in _CUMULATIVE:
        for prefix, v in n.families[i].items():
            try:
                out[prefix] = float(v)
            except ValueError:
                continue
    return out


def _back_above(before: _Seen, fell: _Seen, now: _Seen) -> bool:
    """Whether most cumulative series fell from ``before`` to ``fell`` and are, in
    ``now``, back at or above ``before`` (at least :data:`MIN_SERIES` of them judged)."""
    judged = dropped = back = 0
    b, f = before.values, fell.values
    for prefix, v in now.values.items():
        was, mid = b.get(prefix), f.get(prefix)
        if was is None or mid is None or not was > 0.0:
            continue
        judged += 1
        if mid < was:
            dropped += 1
            if v >= was:
                back += 1
    return judged >= MIN_SERIES and 2 * dropped > judged and 2 * back > judged
