"""The Alertmanager configuration: routes by team and severity, inhibitions, receivers.

* **Routes**: one route per team that has receivers (``teams:`` of the alerting config):
  its tickets (and any other severity) go to the team's ``ticket`` receiver, its pages to
  its ``page`` receiver. Alerts of other teams — registry teams without receivers, models
  not in the registry — fall through to ``default``: pages to ``default.page``, the rest to
  ``default.ticket``. Grouped by ``routing.group_by`` (default: team and model).
* **Inhibitions**: while a burn alert of a faster tier fires, slower tiers of the same SLO
  and model (``slo, model, model_version, backend``) are muted; while an upstream is down,
  the SLO alerts of the models it serves (same ``model``) are muted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetwatch.alerts.alerting import (
    BURN_ALERTS,
    SLO_ALERTS,
    UPSTREAM_DOWN,
    ordered_tiers,
    tier_name,
)
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.recording import SLO_MODEL
from fleetwatch.alerts.render import dump, header
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.spec import DEFAULT_WINDOWS, BurnWindow, SLOFile


class AlertmanagerConfigError(ValueError):
    """The alerting configuration cannot produce an Alertmanager configuration."""


@dataclass
class AlertmanagerConfig:
    """The generated configuration and what the generator noticed."""

    config: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _m(label: str, value: str, op: str = "=") -> str:
    return f'{label}{op}"{value}"'


def inhibit_rules(tiers: list[BurnWindow]) -> list[dict[str, Any]]:
    """Faster burn tiers mute slower ones; an upstream down mutes its models' SLO alerts."""
    burn = _m("alertname", "|".join(BURN_ALERTS), "=~")
    names = [tier_name(w) for w in tiers]
    rules: list[dict[str, Any]] = []
    for i, name in enumerate(names[:-1]):
        rules.append({"source_matchers": [burn, _m("burn_tier", name)],
                      "target_matchers": [burn, _m("burn_tier", "|".join(names[i + 1:]), "=~")],
                      "equal": list(SLO_MODEL)})
    rules.append({"source_matchers": [_m("alertname", UPSTREAM_DOWN)],
                  "target_matchers": [_m("alertname", "|".join(SLO_ALERTS), "=~")],
                  "equal": ["model"]})
    return rules


def build_alertmanager(registry: Registry, cfg: AlertingConfig,
                       slos: SLOFile | None = None) -> AlertmanagerConfig:
    """The Alertmanager configuration (a dict in Alertmanager's schema) and warnings.

    ``slos`` gives the burn tiers to inhibit (default: the SRE Workbook catalog).
    Raises :class:`AlertmanagerConfigError` when the config has no ``default`` receivers.
    """
    if cfg.default is None:
        raise AlertmanagerConfigError(
            "the alerting configuration needs 'default: {page: …, ticket: …}' receivers for "
            "alerts of teams without receivers and of unregistered models")
    warnings = []
    known = {e.team for e in registry.entries} | {cfg.platform.team}
    for team in sorted(known - set(cfg.teams)):
        warnings.append(f"team {team!r} has no receivers in 'teams:'; its alerts go to the "
                        f"default receivers ({cfg.default.page}, {cfg.default.ticket})")
    for team in sorted(set(cfg.teams) - known):
        warnings.append(f"team {team!r} in 'teams:' owns no model of the registry")
    routes: list[dict[str, Any]] = []
    for team, rcv in sorted(cfg.teams.items()):
        routes.append({"receiver": rcv.ticket, "matchers": [_m("team", team)],
                       "routes": [{"receiver": rcv.page, "matchers": [_m("severity", "page")]}]})
    routes.append({"receiver": cfg.default.page, "matchers": [_m("severity", "page")]})
    r = cfg.routing
    tiers = ordered_tiers(slos.windows if slos is not None else DEFAULT_WINDOWS)
    config = {
        "global": {"resolve_timeout": r.resolve_timeout},
        "route": {"receiver": cfg.default.ticket, "group_by": list(r.group_by),
                  "group_wait": r.group_wait, "group_interval": r.group_interval,
                  "repeat_interval": r.repeat_interval, "routes": routes},
        "inhibit_rules": inhibit_rules(tiers),
        "receivers": [{"name": name, **body} for name, body in cfg.receivers.items()],
    }
    return AlertmanagerConfig(config, warnings)


def render_alertmanager(am: AlertmanagerConfig, sources: list[str]) -> str:
    """``alertmanager.yml`` text (``amtool check-config``)."""
    return header("fleetwatch alertmanager", sources) + dump(am.config)
