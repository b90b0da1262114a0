"""Durations of SLO files, rules and ``/slo``: one parser and one formatter.

Every window label fleetwatch writes — the ``window`` label of ``fleetwatch_slo_*``, the
``/slo`` JSON, recording-rule names (``slo:…:burn_rate28d``) and dashboards — comes from
:func:`format_duration`, so one window has one label value everywhere (``28d``, never
``4w``: names read like the SLO period, as the SRE Workbook writes it).
"""

from __future__ import annotations

import re
from decimal import Decimal

_DEC_UNITS = {"ms": Decimal("0.001"), "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600),
              "d": Decimal(86400), "w": Decimal(604800)}
_DURATION_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)")
#: Units written by :func:`format_duration`, in milliseconds; weeks are read, never written.
_FORMAT_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))
#: The longest duration accepted: 100 years (Prometheus ranges end at about 292 years).
MAX_DURATION_SECONDS = 36500 * 86400
_MS = Decimal("0.001")


def parse_duration(text: str | int | float) -> float:
    """``"5m"``, ``"1h30m"``, ``"28d"``, ``"4w"``, ``"250ms"`` or a number of seconds →
    seconds (> 0).

    Computed in decimal, so ``"1.1h"`` is exactly 3960 s. A duration must be a whole number
    of milliseconds (what Prometheus ranges can express) and at most
    :data:`MAX_DURATION_SECONDS`. Raises ``ValueError`` for anything else.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        total = Decimal(text) if isinstance(text, int) else Decimal(repr(float(text)))
        if not total.is_finite() or total <= 0:
            raise ValueError(f"duration must be a positive number of seconds, not {text!r}")
    else:
        s = str(text).strip()
        pos, total = 0, Decimal(0)
        for m in _DURATION_RE.finditer(s):
            if m.start() != pos:
                break
            total += Decimal(m.group(1)) * _DEC_UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s or total <= 0:
            raise ValueError(f"invalid duration {text!r} (use e.g. 30s, 5m, 1h, 28d)")
    if total > MAX_DURATION_SECONDS:
        raise ValueError(f"duration {text!r} is longer than {MAX_DURATION_SECONDS // 86400}d")
    if total % _MS:
        raise ValueError(f"duration {text!r} is not a whole number of milliseconds")
    return float(total)


def format_duration(seconds: float | Decimal) -> str:
    """A Prometheus range in the largest exact unit among d/h/m/s/ms (``28d``, ``1h``,
    ``30s``, ``1500ms``).

    Weeks are never written (``28d``, not ``4w``). Raises ``ValueError`` for durations that
    are not a positive whole number of milliseconds (parsed durations always are).
    """
    d = seconds if isinstance(seconds, Decimal) else Decimal(repr(float(seconds)))
    if not d.is_finite():
        raise ValueError(f"window {seconds!r} s is not finite")
    ms = d * 1000
    if ms <= 0 or ms != ms.to_integral_value():
        raise ValueError(f"window {seconds!r} s is not a positive whole number of "
                         "milliseconds")
    n = int(ms)
    for unit, size in _FORMAT_UNITS:
        if n % size == 0:
            return f"{n // size}{unit}"
    raise AssertionError("unreachable")  # pragma: no cover
