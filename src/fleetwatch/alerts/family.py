"""What an alert family is: its alert names, a function writing its rules and one writing
its behaviour-test scenarios (in the style of sloth's ``plugin/slo/core/<kind>/``).

Adding a family = one module under :mod:`fleetwatch.alerts.families` defining a
:class:`SLOFamily` (rules per SLO, in each SLO's group) or a :class:`PlatformFamily`
(rules in the platform group) and one line in that package's list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import Suite, TestGroup
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.spec import SLOFile, SLOSpec

#: A family's scenarios: test groups for the whole suite (every SLO for an SLO family);
#: what it cannot test goes to :meth:`Suite.skip`, never silently away.
Scenarios = Callable[[Suite], list[TestGroup]]


@dataclass(frozen=True)
class SLOFamily:
    """Alerts generated per SLO: ``rules(slos, slo, registry, cfg)``."""

    name: str
    alerts: tuple[str, ...]
    rules: Callable[[SLOFile, SLOSpec, Registry, AlertingConfig], tuple[AlertRule, ...]]
    scenarios: Scenarios


@dataclass(frozen=True)
class PlatformFamily:
    """Alerts about the platform: ``rules(registry, cfg)``."""

    name: str
    alerts: tuple[str, ...]
    rules: Callable[[Registry, AlertingConfig], tuple[AlertRule, ...]]
    scenarios: Scenarios
