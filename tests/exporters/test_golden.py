"""Golden files: the normalized form of every fixture (regenerate: python tools/regen_golden.py).

Goldens are computed inside the tests (one fixture per test), so a generator crash is a
test failure naming the fixture, not a collection error.
"""

from __future__ import annotations

import pytest
from tools.golden import fixture_paths, golden_of

from fleetwatch.labels.registry import load_registry
from tests.support.helpers import FIXTURES, GOLDEN, ROOT

REGISTRY_PATH = ROOT / "tests" / "data" / "registry.yaml"


@pytest.fixture(scope="module")
def registry():
    return load_registry(REGISTRY_PATH)


@pytest.mark.parametrize("path", fixture_paths(FIXTURES),
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_matches_golden(path, registry):
    for rel, text in golden_of(path, FIXTURES, registry).items():
        golden = GOLDEN / rel
        assert golden.exists(), f"missing golden {rel}: run python tools/regen_golden.py"
        assert text == golden.read_text(encoding="utf-8"), (
            f"{rel} changed: review, then run python tools/regen_golden.py")


def test_no_stale_golden_files(registry):
    """Every golden file of an exposition directory has its fixture (other generators,
    e.g. dashboards/ and alerts/, keep their own golden folders)."""
    dirs = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    on_disk = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*")
               if p.is_file() and p.relative_to(GOLDEN).parts[0] in dirs}
    expected = {rel for p in fixture_paths(FIXTURES) for rel in golden_of(p, FIXTURES, registry)}
    assert on_disk == expected


def test_docs_metrics_md_matches_schema():
    from fleetwatch.schema_doc import metrics_markdown

    assert (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8") == metrics_markdown(), (
        "docs/metrics.md drifted from the schema: fleetwatch schema --markdown > docs/metrics.md")
