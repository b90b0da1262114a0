"""``fleetwatch rules``: every rule file from the registry, the SLO file and the alerting
configuration — pure functions returning ``{file name: text}``; only ``fleetwatch.files.write_tree``
touches the disk."""

from __future__ import annotations

from pathlib import Path

from fleetwatch.alerts.alerting import (
    RuleGroup,
    model_recording_groups,
    platform_groups,
    slo_groups,
)
from fleetwatch.alerts.alertmanager import (
    AlertmanagerConfig,
    AlertmanagerConfigError,
    build_alertmanager,
    render_alertmanager,
)
from fleetwatch.alerts.behaviour import behaviour_suite, render_behaviour_tests
from fleetwatch.alerts.config import (
    AlertingConfig,
    AlertingConfigError,
    load_alerting_config,
    parse_alerting_config,
)
from fleetwatch.alerts.render import prometheus_rule, rule_file
from fleetwatch.labels.registry import Registry, RegistryError, load_registry
from fleetwatch.slo.spec import SLOFile, SLOSpecError, load_slo_file

ALERTMANAGER_FILE = "alertmanager.yml"
RECORDING_FILE = "fleetwatch-recording.rules.yml"
SLO_FILE = "fleetwatch-slo.rules.yml"
PLATFORM_FILE = "fleetwatch-platform.rules.yml"
OPERATOR_FILE = "fleetwatch.prometheusrule.yaml"
TESTS_FILE = "fleetwatch.rules.test.yml"
#: The plain rule files, in the order Prometheus should load them.
RULE_FILES = (RECORDING_FILE, SLO_FILE, PLATFORM_FILE)
COMMAND = "fleetwatch rules"


def rule_groups(registry: Registry, slos: SLOFile, cfg: AlertingConfig
                ) -> dict[str, list[RuleGroup]]:
    """The rule groups of each plain rule file."""
    return {RECORDING_FILE: model_recording_groups(),
            SLO_FILE: slo_groups(slos, registry, cfg),
            PLATFORM_FILE: platform_groups(registry, cfg)}


def build_rules(registry: Registry, slos: SLOFile, cfg: AlertingConfig,
                sources: list[str], formats: tuple[str, ...] = ("plain", "operator"),
                tests: bool = False, not_covered: list[str] | None = None) -> dict[str, str]:
    """``{file name: text}``: the plain rule files and/or the ``PrometheusRule``, and with
    ``tests`` the ``promtool test rules`` behaviour tests of the plain files; what those
    tests do not cover is appended to ``not_covered`` when given (one sentence per case,
    see :class:`~fleetwatch.alerts.behaviour.BehaviourTests`).

    ``sources`` names the inputs in the header (use base names: output must not depend on
    where the inputs live). Raises :class:`~fleetwatch.alerts.behaviour.BehaviourTestError`
    when ``tests`` cannot be generated for these specs.
    """
    groups = rule_groups(registry, slos, cfg)
    out: dict[str, str] = {}
    if "plain" in formats:
        for name, gs in groups.items():
            out[name] = rule_file(gs, COMMAND, sources)
    if "operator" in formats:
        every = [g for gs in groups.values() for g in gs]
        out[OPERATOR_FILE] = prometheus_rule(every, cfg.prometheus_rule, COMMAND, sources)
    if tests:
        every = [g for gs in groups.values() for g in gs]
        suite = behaviour_suite(registry, slos, cfg, list(RULE_FILES), every)
        out[TESTS_FILE] = render_behaviour_tests(suite.doc, sources)
        if not_covered is not None:
            not_covered.extend(suite.not_covered)
    return out


def build_alertmanager_file(registry: Registry, cfg: AlertingConfig, slos: SLOFile | None,
                            sources: list[str]) -> tuple[str, AlertmanagerConfig]:
    """``alertmanager.yml`` text and the generated configuration (with its warnings)."""
    am = build_alertmanager(registry, cfg, slos)
    return render_alertmanager(am, sources), am


class InputError(ValueError):
    """An input file is missing or invalid (the message names the file and the field)."""


def load_inputs(registry_path: str | Path, slos_path: str | Path | None,
                receivers_path: str | Path | None
                ) -> tuple[Registry, SLOFile | None, AlertingConfig]:
    """Read and validate the registry, the SLO file and the alerting configuration (all
    defaults without one). Raises :class:`InputError`."""
    try:
        registry = load_registry(registry_path)
        slos = load_slo_file(slos_path) if slos_path else None
        cfg = (load_alerting_config(receivers_path) if receivers_path
               else parse_alerting_config({}))
    except (RegistryError, SLOSpecError, AlertingConfigError) as exc:
        raise InputError(str(exc)) from None
    return registry, slos, cfg


def source_names(*paths: str | Path | None) -> list[str]:
    """Base names of the given inputs, for file headers."""
    return [Path(p).name for p in paths if p]


__all__ = ["ALERTMANAGER_FILE", "OPERATOR_FILE", "RULE_FILES", "TESTS_FILE",
           "AlertmanagerConfigError", "InputError", "build_alertmanager_file", "build_rules",
           "load_inputs", "rule_groups", "source_names"]

