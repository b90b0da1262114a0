"""Golden outputs of the mappings: the normalized form of every captured exposition.

Used by ``tools/regen_golden.py`` (writes them) and the tests (compare with them).
"""

from __future__ import annotations

from pathlib import Path

from fleetwatch.exporters.mapping import Normalizer, render
from fleetwatch.exporters.sources import TABLES, detect_kind
from fleetwatch.labels.registry import load_registry


def golden_outputs(fixtures: Path, registry_path: Path) -> dict[str, str]:
    """``{relative golden path: text}`` for every fixture file under ``fixtures``."""
    registry = load_registry(registry_path)
    out: dict[str, str] = {}
    for path in sorted(p for p in fixtures.rglob("*") if p.is_file() and p.suffix != ".md"):
        text = path.read_text(encoding="utf-8")
        kind = detect_kind(text)
        n = Normalizer(TABLES[kind]).normalize(text)
        extra = {"modelserver_model_info": registry.info_lines(n.models)}
        rel = path.relative_to(fixtures)
        out[f"{rel}.normalized.prom"] = render([n], extra)
        skipped = "".join(f"  line {b.lineno}: {b.reason}\n" for b in n.meta.invalid)
        out[f"{rel}.summary"] = (
            f"source={kind} samples={n.meta.sample_lines} series={n.series_count} "
            f"models={len(n.models)} skipped_lines={len(n.meta.invalid)}\n"
            f"unmapped_families={sorted(n.unmapped)}\n{skipped}")
    return out
