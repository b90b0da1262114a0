"""Behaviour tests for the generated rules, for ``promtool test rules`` — generated from the
same specs as the rules: the recording rules' scenarios
(:mod:`~fleetwatch.alerts.families.recorded`), then each alert family's
(:mod:`fleetwatch.alerts.families`: SLO families, then platform families).

Expected labels and annotations are rendered from the rules' own templates
(:mod:`fleetwatch.alerts.gotemplate`), so a template that Prometheus renders differently
fails the test. What the document does not test — a tier whose threshold cannot be
reached, a catalog too slow for promtool, a registry entry without a testable name — is
listed in :attr:`BehaviourTests.not_covered`, never dropped silently
(``fleetwatch rules --tests`` prints it to stderr).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.families import PLATFORM_FAMILIES, SLO_FAMILIES
from fleetwatch.alerts.families.recorded import recording_scenarios
from fleetwatch.alerts.render import dump, header
from fleetwatch.alerts.rules import RuleGroup
from fleetwatch.alerts.scenarios import STEP, BehaviourTestError, RuleIndex, Suite, TestGroup
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.spec import SLOFile

__all__ = ["BehaviourTestError", "BehaviourTests", "behaviour_suite", "behaviour_tests",
           "render_behaviour_tests"]


@dataclass(frozen=True)
class BehaviourTests:
    """The ``promtool test rules`` document (a dict in promtool's schema) and the cases it
    does not test, one sentence each (``"<what>: <why>"``), in generation order."""

    doc: dict[str, Any]
    not_covered: list[str] = field(default_factory=list)


def behaviour_suite(registry: Registry, slos: SLOFile, cfg: AlertingConfig,
                    rule_files: list[str], groups: list[RuleGroup]) -> BehaviourTests:
    """The behaviour tests of ``groups`` (generated from the same specs) and what they do
    not cover; ``rule_files`` are paths relative to the test file. Raises
    :class:`BehaviourTestError` when the specs allow no unambiguous test."""
    suite = Suite(registry, slos, cfg, RuleIndex(groups))
    tests: list[TestGroup] = recording_scenarios(suite)
    for slo_family in SLO_FAMILIES:
        tests += slo_family.scenarios(suite)
    for platform_family in PLATFORM_FAMILIES:
        tests += platform_family.scenarios(suite)
    doc = {"rule_files": list(rule_files), "evaluation_interval": f"{STEP // 60}m",
           "tests": [t.to_dict() for t in tests]}
    return BehaviourTests(doc, list(suite.not_covered))


def behaviour_tests(registry: Registry, slos: SLOFile, cfg: AlertingConfig,
                    rule_files: list[str], groups: list[RuleGroup]) -> dict[str, Any]:
    """The ``promtool test rules`` document of :func:`behaviour_suite` (without the list of
    what it does not cover)."""
    return behaviour_suite(registry, slos, cfg, rule_files, groups).doc


def render_behaviour_tests(doc: dict[str, Any], sources: list[str]) -> str:
    """The test file's text: the generated-file header, then the document as YAML."""
    return header("fleetwatch rules --tests", sources) + dump(doc)
