"""Exact number and duration formatting for generated rules.

Every number that reaches a rule file goes through :func:`num`: ``0.999`` stays ``0.999``
(never ``0.9990000000000001``), ``1 - 0.999`` is ``0.001``, ``14.4`` is ``14.4``, ``1e-13``
is ``0.0000000000001``, integers have no ``.0`` and nothing is written in exponent form.
Arithmetic on SLO numbers is done in :class:`~decimal.Decimal` from the shortest ``repr``
of the spec's floats, so the generated text is what a person would write.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

from fleetwatch.slo.durations import format_duration

#: Significant digits kept: a float's shortest repr has up to 17, of which the last one or
#: two are binary noise (``0.1 + 0.2`` is ``0.30000000000000004``); 15 are always exact.
SIGNIFICANT = 15


def dec(x: float | int | Decimal) -> Decimal:
    """``x`` as a Decimal of its shortest repr, rounded to :data:`SIGNIFICANT` significant
    digits — not to a number of decimal places, so ``1e-13`` stays ``1e-13`` (an error
    budget of 0.9999999999999 is not 0). Raises ``ValueError`` for NaN and infinities."""
    if isinstance(x, int) and not isinstance(x, bool):
        return Decimal(x)  # exact already
    d = x if isinstance(x, Decimal) else Decimal(repr(float(x)))
    if not d.is_finite():
        raise ValueError(f"{x!r} is not a finite number")
    with localcontext() as ctx:
        ctx.prec = SIGNIFICANT
        return (+d).normalize()


def num(x: float | int | Decimal) -> str:
    """The exact plain text of a number: ``0.999``, ``0.001``, ``14.4``, ``2``, ``0.000001``."""
    d = dec(x)
    if d == 0:
        return "0"
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def approx(x: float | Decimal, digits: int = 4) -> str:
    """A ratio for prose: exact (:func:`num`) when it has at most ``digits + 2`` significant
    digits (``14.4``, ``2102.4``, ``525600``), else rounded to ``digits`` (``10.29`` for
    10.285714…) — never in exponent form (``5.256e+05``)."""
    d = dec(x)
    if len(d.as_tuple().digits) <= digits + 2:
        return num(d)
    with localcontext() as ctx:
        ctx.prec = digits
        return num(+d)


def percent(ratio: float | Decimal) -> str:
    """``0.999`` → ``99.9%``."""
    return f"{num(dec(ratio) * 100)}%"


def error_budget(objective: float) -> Decimal:
    """``1 - objective`` exactly (``0.999`` → ``0.001``)."""
    return dec(Decimal(1) - dec(objective))


def burn_factor(budget_consumed: float, period_seconds: float, long_seconds: float) -> Decimal:
    """Burn-rate threshold ``budget_consumed × period / long`` (0.02, 30d, 1h → 14.4)."""
    with localcontext() as ctx:
        ctx.prec = 40
        return dec(dec(budget_consumed) * dec(period_seconds) / dec(long_seconds))


#: Window labels come from the one formatter the SLO engine uses too (``28d``).
window = format_duration


def human_duration(seconds: float | Decimal) -> str:
    """A readable duration for annotations: ``2.08d``, ``50h``, ``36m`` (3 significant digits)."""
    s = float(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= 2 * size or (unit == "m" and s >= size):
            return f"{num(float(f'{s / size:.3g}'))}{unit}"
    return f"{num(float(f'{s:.3g}'))}s"
