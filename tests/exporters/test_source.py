"""``unmapped_summary``: the sidecar's log line for unmapped upstream families tells the
families a source leaves unmapped on purpose (a reason in docs/metrics.md) from those it
does not know."""

from __future__ import annotations

from fleetwatch.exporters.source import unmapped_summary
from fleetwatch.exporters.sources import SOURCES_BY_KIND


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
