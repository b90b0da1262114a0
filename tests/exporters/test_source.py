"""A source's declarations: ``unmapped_summary`` (the sidecar's log line for unmapped
upstream families tells the families a source leaves unmapped on purpose, with a reason in
docs/metrics.md, from those it does not know), and the LLM runtimes and OpenAI-compatible
servers the registry gathers from the sources."""

from __future__ import annotations

from fleetwatch.exporters.source import unmapped_summary
from fleetwatch.exporters.sources import (
    LLM_RUNTIMES,
    OPENAI_SERVER_KINDS,
    SOURCES,
    SOURCES_BY_KIND,
)
from fleetwatch.otlp import semconv


def test_known_and_unknown_unmapped_families_are_told_apart():
    names = ["http_requests_total", "vllm:brand_new_family", "vllm:request_params_n"]
    text = unmapped_summary(SOURCES_BY_KIND["vllm"], names, "dropped")
    head, unknown, known = text.split("; ")
    assert head == "3 upstream families not mapped (dropped)"
    assert unknown == "1 unknown to the mapping: vllm:brand_new_family"
    assert known == ("2 left unmapped on purpose, see docs/metrics.md: http_requests_total, "
                     "vllm:request_params_n")


def test_without_a_source_every_family_is_unknown():
    assert unmapped_summary(None, ["a"], "passed through") == (
        "1 upstream family not mapped (passed through); 1 unknown to the mapping: a")


def test_llm_runtimes_are_declared_by_their_sources():
    assert {"vllm", "sglang", "tensorrt_llm"} == LLM_RUNTIMES
    for source in SOURCES:
        assert set(source.llm_runtimes) <= set(source.runtimes), source.kind
    assert semconv.is_llm("tensorrt_llm") and not semconv.is_llm("onnxruntime")


def test_the_openai_compatible_servers_are_the_llm_engines_serving_their_own_api():
    assert {"vllm", "sglang"} == OPENAI_SERVER_KINDS
    for kind in OPENAI_SERVER_KINDS:
        assert SOURCES_BY_KIND[kind].runtimes == SOURCES_BY_KIND[kind].llm_runtimes
