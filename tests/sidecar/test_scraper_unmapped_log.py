"""The sidecar's log line for unmapped upstream families tells the families a source leaves
unmapped on purpose (with a reason in docs/metrics.md) from those it does not know."""

from __future__ import annotations

import logging

from fleetwatch.exporters.sources import SOURCES_BY_KIND
from fleetwatch.sidecar import scraper


def test_known_and_unknown_unmapped_families_are_told_apart(caplog):
    names = ["http_requests_total", "vllm:brand_new_family", "vllm:request_params_n"]
    with caplog.at_level(logging.INFO, logger=scraper.log.name):
        scraper._log_unmapped("vllm-0", SOURCES_BY_KIND["vllm"], names, "dropped")
    (record,) = [r for r in caplog.records if "not mapped" in r.getMessage()]
    message = record.getMessage()
    unknown, known = message.split("; ", 1)[1].split("; ")
    assert unknown == "1 unknown to the mapping: vllm:brand_new_family"
    assert known == ("2 left unmapped on purpose, see docs/metrics.md: http_requests_total, "
                     "vllm:request_params_n")


def test_without_a_source_every_family_is_unknown(caplog):
    with caplog.at_level(logging.INFO, logger=scraper.log.name):
        scraper._log_unmapped("t", None, ["a", "b"], "passed through")
    assert caplog.records[-1].getMessage().endswith(
        "2 upstream families not mapped (passed through); 2 unknown to the mapping: a, b")
