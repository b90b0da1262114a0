"""``fleetwatch rules``: every rule file from the registry, the SLO file and the alerting
configuration — pure functions returning ``{file name: text}``; only :func:`write_files`
touches the disk."""

from __future__ import annotations

from pathlib import Path

from fleetwatch.alerts.alerting import (
    RuleGroup,
    model_recording_groups,
    platform_groups,
    slo_groups,
)
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.render import prometheus_rule, rule_file
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.spec import SLOFile

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
                sources: list[str], formats: tuple[str, ...] = ("plain", "operator")
                ) -> dict[str, str]:
    """``{file name: text}``: the plain rule files and/or the ``PrometheusRule``.

    ``sources`` names the inputs in the header (use base names: output must not depend on
    where the inputs live).
    """
    groups = rule_groups(registry, slos, cfg)
    out: dict[str, str] = {}
    if "plain" in formats:
        for name, gs in groups.items():
            out[name] = rule_file(gs, COMMAND, sources)
    if "operator" in formats:
        every = [g for gs in groups.values() for g in gs]
        out[OPERATOR_FILE] = prometheus_rule(every, cfg.prometheus_rule, COMMAND, sources)
    return out


def write_files(files: dict[str, str], out_dir: str | Path) -> list[Path]:
    """Write ``files`` under ``out_dir`` (created if needed); the written paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        p = d / name
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths
