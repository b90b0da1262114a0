"""Counts in the CLI's and the explanations' English: ``counted(1, "file")`` is
"1 file", ``counted(3, "file")`` "3 files"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"<n> <noun>"`` with the noun's plural (``plural``, default ``noun + "s"``) unless
    ``n`` is 1."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
