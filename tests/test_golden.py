"""Golden files: the normalized form of every fixture (regenerate: python tools/regen_golden.py)."""

from __future__ import annotations

import pytest
from tests.helpers import FIXTURES, GOLDEN, ROOT

from fleetwatch.golden import golden_outputs

OUTPUTS = golden_outputs(FIXTURES, ROOT / "tests" / "data" / "registry.yaml")


@pytest.mark.parametrize("rel", sorted(OUTPUTS), ids=str)
def test_matches_golden(rel):
    path = GOLDEN / rel
    assert path.exists(), f"missing golden {rel}: run python tools/regen_golden.py"
    assert OUTPUTS[rel] == path.read_text(encoding="utf-8"), (
        f"{rel} changed: review, then run python tools/regen_golden.py")


def test_no_stale_golden_files():
    """Every golden file of an exposition directory has its fixture (other generators,
    e.g. dashboards/ and alerts/, keep their own golden folders)."""
    dirs = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    on_disk = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*")
               if p.is_file() and p.relative_to(GOLDEN).parts[0] in dirs}
    assert on_disk == set(OUTPUTS)


def test_docs_metrics_md_matches_schema():
    from fleetwatch.schema_doc import metrics_markdown

    assert (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8") == metrics_markdown(), (
        "docs/metrics.md drifted from the schema: fleetwatch schema --markdown > docs/metrics.md")
