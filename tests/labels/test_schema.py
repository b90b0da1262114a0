"""The schema's naming rules, as tests: counters end in ``_total`` (and nothing else does),
base units only, every label declared, HELP carries the stability (kube-state-metrics /
Kubernetes component-base style), deprecations name their version."""

from __future__ import annotations

import re

import pytest

from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.exporters.sources import SOURCES
from fleetwatch.labels.schema import (
    LABELS_BY_NAME,
    METRICS,
    METRICS_BY_NAME,
    SELF_METRICS,
    allowed_labels,
)
from tests.support.helpers import GOLDEN

ALL = METRICS + SELF_METRICS
#: Base units (Prometheus naming practice) and the dimensionless counts the schema uses.
BASE_UNITS = {"seconds", "bytes", "ratio", "joules", "watts", "celsius", "boolean", "info",
              "requests", "tokens", "blocks", "lookups", "executions", "items",
              "preemptions", "events", "errors", "series", "families", "lines",
              "samples", "connections", "models", "replicas", "intervals",
              "flop",  # flop: floating-point operations, a count (MFU numerator)
              "drafts",  # speculative-decoding drafts, a count (vLLM spec_decode_num_drafts)
              "spans", "traces", "bodies",  # the OTLP trace receiver counts what it receives
              # quota families: the unit is the resource label's (GPUs, bytes, instances),
              # as issue 16 names them (fleetwatch_quota_usage{team, resource})
              "resource",
              "hertz",  # GPU clocks (dcgm MHz × 10^6)
              "bitmask", "code"}  # NVML clocks-event reasons bits, the last XID error code
#: Unit words that must not appear in a family name (not base units).
#: Families named without their unit suffix, and why (renaming is a deprecation cycle).
UNIT_SUFFIX_EXEMPT = {
    "fleetwatch_slo_burn_rate": "the SRE-workbook term, as Sloth and Pyrra name it",
}
NOT_BASE = ("_ms", "_us", "_milliseconds", "_microseconds", "_minutes", "_hours", "_kb",
            "_mb", "_gb", "_mib", "_kilobytes", "_megabytes", "_percent", "_perc")


@pytest.mark.parametrize("m", ALL, ids=lambda m: m.name)
def test_counters_and_only_counters_end_in_total(m):
    assert m.name.endswith("_total") == (m.type == "counter"), m.name


@pytest.mark.parametrize("m", ALL, ids=lambda m: m.name)
def test_base_units(m):
    assert m.unit in BASE_UNITS, (m.name, m.unit)
    assert not any(bad in m.name + "_" for bad in (s + "_" for s in NOT_BASE)), m.name
    if m.unit in ("seconds", "bytes", "ratio", "joules", "watts", "celsius", "hertz") \
            and m.name not in UNIT_SUFFIX_EXEMPT:
        stem = m.name[:-6] if m.name.endswith("_total") else m.name
        assert stem.endswith("_" + m.unit) or (m.unit == "seconds" and "_seconds" in stem), \
            (m.name, m.unit)


@pytest.mark.parametrize("m", ALL, ids=lambda m: m.name)
def test_every_label_is_declared(m):
    undeclared = [lab for lab in allowed_labels(m) if lab not in LABELS_BY_NAME]
    assert not undeclared, (m.name, undeclared)


def test_every_label_in_the_goldens_is_declared_for_its_family():
    """What the mappings really emit: each series' labels are allowed on its family."""
    for path in sorted(GOLDEN.rglob("*.normalized.prom")):
        samples, meta = parse_exposition(path.read_text(encoding="utf-8"))
        assert not meta.invalid, path
        for name, labels, _v in samples:
            fam = next(f for f in (name, re.sub(r"_(bucket|sum|count)$", "", name))
                       if f in METRICS_BY_NAME)
            extra = ("team", "owner", "oncall", "latency_tier") if fam.endswith("_info") else ()
            bad = {k for k, _ in labels} - set(allowed_labels(METRICS_BY_NAME[fam])) - set(extra)
            assert not bad, (path.name, name, bad)


@pytest.mark.parametrize("m", ALL, ids=lambda m: m.name)
def test_help_carries_stability_and_deprecation(m):
    text = m.exposition_help
    assert text.startswith(f"[{m.stability.upper()}] "), text
    if m.deprecated_since:
        assert re.fullmatch(r"\d+\.\d+\.\d+", m.deprecated_since), m.deprecated_since
        assert f"(Deprecated since {m.deprecated_since}) " in text
    else:
        assert "Deprecated" not in text


def test_served_help_lines_carry_stability():
    for path in sorted(GOLDEN.rglob("*.normalized.prom")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# HELP modelserver_"):
                assert re.match(r"# HELP \S+ \[(STABLE|BETA|ALPHA)\] ", line), (path.name, line)


def test_backend_values_are_the_registered_sources():
    from fleetwatch.schema_doc import label_values

    assert set(label_values(LABELS_BY_NAME["backend"])) == {s.backend for s in SOURCES}
    assert {"triton", "vllm", "dcgm", "sglang"} <= {s.kind for s in SOURCES}
