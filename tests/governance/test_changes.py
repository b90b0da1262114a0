"""The change classes: the data table classifies each field path, registry entries added
or removed are one change, and validated documents are compared (a default written out
is no change)."""

from __future__ import annotations

import pytest

from fleetwatch.governance.changes import (
    FieldChange,
    classify,
    diff_registries,
    group,
)
from fleetwatch.labels.registry import parse_registry

ENTRY = {"name": "ranker", "team": "search", "owner": "a@example.com", "oncall": "pager"}


@pytest.mark.parametrize(("path", "cls"), [
    ("owner", "owner"), ("oncall", "owner"), ("team", "owner"),
    ("latency_tier", "tier"),
    ("declared.engine_version", "engine_swap"),
    ("quantization", "quantization"), ("declared.quantization", "quantization"),
    ("declared.model_version", "model_version"),
    ("declared.instance_groups", "placement"),
    ("placement.GPU-0.ranker@1.instances", "placement"),
    ("quota.search.gpus", "quota"), ("quota.search.models.ranker.instances", "quota"),
    ("description", "other"), ("deployment.max_replicas", "other"),
])
def test_each_field_path_has_its_class(path: str, cls: str) -> None:
    assert classify(path) == cls


def test_declared_fields_are_classified_from_the_dumped_document() -> None:
    # the registry's declared: block arrives as dumped fields; grouped per subject
    fields = [FieldChange("ranker", "declared.engine_version", "2.50", "2.51", "a"),
              FieldChange("ranker", "declared.quantization", "none", "fp8", "a"),
              FieldChange("ranker", "description", "x", "y", "a")]
    assert [(c.id, c.owner) for c in group(fields)] == [
        ("engine_swap:ranker", "a"), ("quantization:ranker", "a"), ("other:ranker", "a")]


def test_an_added_and_a_removed_entry_are_one_change_each() -> None:
    old = parse_registry({"models": [ENTRY]})
    new = parse_registry({"models": [{**ENTRY, "name": "llm", "version": "2"}]})
    changes = group(diff_registries(old, new))
    assert [c.id for c in changes] == ["model_added:llm@2", "model_removed:ranker"]


def test_a_default_written_out_is_no_change() -> None:
    old = parse_registry({"models": [ENTRY]})
    new = parse_registry({"models": [{**ENTRY, "latency_tier": "standard"}]})
    assert diff_registries(old, new) == []


def test_a_tier_and_owner_change_name_old_and_new() -> None:
    old = parse_registry({"models": [ENTRY]})
    new = parse_registry({"models": [{**ENTRY, "latency_tier": "interactive",
                                      "owner": "b@example.com"}]})
    changes = group(diff_registries(old, new))
    assert [(c.id, c.describe(), c.owner) for c in changes] == [
        ("owner:ranker", "owner a@example.com → b@example.com", "b@example.com"),
        ("tier:ranker", "latency_tier standard → interactive", "b@example.com")]


@pytest.mark.parametrize("adding", [True, False], ids=["added", "removed"])
def test_a_declared_block_changes_only_the_keys_it_declares(adding: bool) -> None:
    # a key the block does not declare is not compared: absent and null are the same
    bare = parse_registry({"models": [ENTRY]})
    declared = parse_registry({"models": [{**ENTRY, "declared": {"engine_version": "0.32.0"}}]})
    old, new = (bare, declared) if adding else (declared, bare)
    changes = group(diff_registries(old, new))
    assert [(c.id, c.describe()) for c in changes] == [
        ("engine_swap:ranker", "declared.engine_version - → 0.32.0" if adding
         else "declared.engine_version 0.32.0 → -")]
