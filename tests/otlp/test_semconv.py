"""fleetwatch's OTLP metric names against the GenAI semantic conventions' own files
(copies with provenance in ``tests/data/otel-genai/``): every ``gen_ai.*`` metric it can
export is defined there with the same instrument and unit, its advised buckets are the
conventions', and an LLM series carries the attributes the conventions require."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fleetwatch.labels.schema import METRICS_BY_NAME
from fleetwatch.otlp import semconv

DATA = Path(__file__).resolve().parents[1] / "data" / "otel-genai"


def _conventions() -> dict[str, dict[str, object]]:
    doc = yaml.safe_load((DATA / "metrics.yaml").read_text(encoding="utf-8"))
    return {m["name"]: m for m in doc["metrics"]}


def _advised_buckets() -> dict[str, tuple[float, ...]]:
    text = (DATA / "gen-ai-metrics-server-bucket-advice.md").read_text(encoding="utf-8")
    found = re.findall(r"### Metric: `([^`]+)`\s+This metric SHOULD be specified with "
                       r"\[ExplicitBucketBoundaries\] of\s+\[([^\]]+)\]", text)
    return {name: tuple(float(v) for v in values.split(",")) for name, values in found}


CONVENTIONS = _conventions()
EXPORTED = sorted(semconv.GENAI_METRICS)


def test_the_copies_define_the_server_metrics():
    assert {"gen_ai.server.request.duration", "gen_ai.server.time_to_first_token",
            "gen_ai.server.time_per_output_token"} <= set(CONVENTIONS)
    assert len(_advised_buckets()) == 3


def test_fleetwatch_exports_gen_ai_metrics():
    assert EXPORTED, "no gen_ai.* metric in the schema"


@pytest.mark.parametrize("name", EXPORTED)
def test_every_exported_gen_ai_metric_is_defined_with_its_instrument_and_unit(name):
    assert name in CONVENTIONS, f"{name} is not a metric of the GenAI conventions"
    families = [m for m in METRICS_BY_NAME.values() if m.otel == name]
    assert families
    for m in families:
        assert m.type == CONVENTIONS[name]["instrument"], (m.name, m.type)
        assert semconv.unit(m) == CONVENTIONS[name]["unit"], (m.name, semconv.unit(m))


@pytest.mark.parametrize("name", EXPORTED)
def test_advised_buckets_are_the_conventions(name):
    assert semconv.RECOMMENDED_BUCKETS[name] == _advised_buckets()[name]


def test_every_recommended_bucket_set_is_for_an_exported_metric():
    assert set(semconv.RECOMMENDED_BUCKETS) == set(EXPORTED)


@pytest.mark.parametrize("name", EXPORTED)
def test_an_llm_series_carries_the_required_attributes(name):
    """``gen_ai.provider.name`` (required by the group every GenAI metric uses) and
    ``gen_ai.operation.name`` (required on every GenAI metric), with a well-formed
    ``gen_ai.request.model``."""
    required = {a["ref"] for g in yaml.safe_load(
        (DATA / "metrics.yaml").read_text(encoding="utf-8"))["attribute_groups"]
        if g["id"] == "metric_attributes.gen_ai" for a in g["attributes"]
        if "ref" in a and a.get("requirement_level") == "required"}
    assert required == {"gen_ai.provider.name"}
    refs = {a.get("ref_group") for a in CONVENTIONS[name]["attributes"]}
    assert "metric_attributes.gen_ai" in refs
    attrs = semconv.attributes({"model": "tiny-llm", "backend": "vllm", "runtime": "vllm"},
                               name, llm=True)
    assert attrs["gen_ai.provider.name"] == "vllm"
    assert attrs["gen_ai.operation.name"] == semconv.OPERATION
    assert attrs["gen_ai.request.model"] == "tiny-llm"


def test_a_non_llm_series_carries_no_gen_ai_name():
    for m in METRICS_BY_NAME.values():
        if m.otel.startswith("gen_ai."):
            assert not semconv.metric_name(m, llm=False).startswith("gen_ai.")
    attrs = semconv.attributes({"model": "ranker", "backend": "triton"},
                               "modelserver.request.duration", llm=False)
    assert not any(k.startswith("gen_ai.") for k in attrs)


def test_every_gen_ai_name_fleetwatch_gives_is_in_the_conventions_or_their_registry():
    """Metric names from the copied YAML; attribute names as the YAML references them or
    as the GenAI metrics page lists them (operation, provider, request model, token type)."""
    yaml_refs = set(re.findall(r"ref: (gen_ai\.[a-z_.]+)",
                               (DATA / "metrics.yaml").read_text(encoding="utf-8")))
    page_attributes = {"gen_ai.operation.name", "gen_ai.provider.name",
                       "gen_ai.request.model", "gen_ai.token.type"}
    known = set(CONVENTIONS) | yaml_refs | page_attributes
    assert semconv.GENAI_NAMES - known == set()
