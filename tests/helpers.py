"""Shared test helpers (no fixtures here; see conftest.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "expositions"
GOLDEN = ROOT / "tests" / "golden"


def fixture_files() -> list[Path]:
    """Every captured exposition under tests/fixtures/expositions (SOURCES.md excluded)."""
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "SOURCES.md")
