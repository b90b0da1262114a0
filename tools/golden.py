"""Golden outputs of the mappings: the normalized form of every captured exposition.

Test tooling, not part of the package: used by ``tools/regen_golden.py`` (writes them) and
``tests/exporters/test_golden.py`` (compares with them, one fixture per test, computed in the test).
"""

from __future__ import annotations

from pathlib import Path

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import TABLES, detect_kind
from fleetwatch.labels.registry import Registry, load_registry


def fixture_paths(fixtures: Path) -> list[Path]:
    """Every exposition fixture under ``fixtures`` (Markdown provenance files excluded)."""
    return sorted(p for p in fixtures.rglob("*") if p.is_file() and p.suffix != ".md")


def golden_of(path: Path, fixtures: Path, registry: Registry) -> dict[str, str]:
    """``{relative golden path: text}`` of one fixture: its ``.normalized.prom`` (what
    ``fleetwatch normalize`` prints with ``registry``) and its ``.summary``."""
    text = path.read_text(encoding="utf-8")
    kind = detect_kind(text)
    n = Normalizer(TABLES[kind]).normalize(text)
    extra = {"modelserver_model_info": registry.info_lines(n.models)}
    rel = path.relative_to(fixtures)
    skipped = "".join(f"  line {b.lineno}: {b.reason}\n" for b in n.meta.invalid)
    return {
        f"{rel}.normalized.prom": render([n], extra),
        f"{rel}.summary": (
            f"source={kind} samples={n.meta.sample_lines} series={n.series_count} "
            f"models={len(n.models)} skipped_lines={len(n.meta.invalid)}\n"
            f"unmapped_families={sorted(n.unmapped)}\n{skipped}"),
    }


def golden_outputs(fixtures: Path, registry_path: Path) -> dict[str, str]:
    """``{relative golden path: text}`` for every fixture file under ``fixtures``."""
    registry = load_registry(registry_path)
    out: dict[str, str] = {}
    for path in fixture_paths(fixtures):
        out.update(golden_of(path, fixtures, registry))
    return out
