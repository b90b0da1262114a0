"""The alert families, one module each with its rules and its behaviour-test scenarios.

Order matters: it is the order of the rules in each group and of the tests in the
document (the golden files pin both).
"""

from __future__ import annotations

from fleetwatch.alerts.families import (
    attribution,
    burn,
    config_drift,
    engine_frozen,
    gpus,
    misconfigured,
    no_data,
    not_ready,
    rollout,
    saturation,
    sidecar_down,
    upstream_down,
)
from fleetwatch.alerts.family import PlatformFamily, SLOFamily

#: Families with rules per SLO (in the SLO's group, after its burn-rate recording rules).
SLO_FAMILIES: tuple[SLOFamily, ...] = (burn.FAMILY, attribution.FAMILY, no_data.FAMILY,
                                       misconfigured.FAMILY)
#: Families in the platform group.
PLATFORM_FAMILIES: tuple[PlatformFamily, ...] = (
    sidecar_down.FAMILY, upstream_down.FAMILY, engine_frozen.FAMILY, not_ready.FAMILY,
    saturation.FAMILY,
    gpus.FAMILY, rollout.FAMILY, config_drift.FAMILY)
