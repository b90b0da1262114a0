"""The alerting configuration (YAML), validated strictly: receivers per team, URL templates,
platform-alert settings and Alertmanager routing parameters.

::

    urls:                         # optional; placeholders: {alertname} {slo} {model}
      runbook: https://runbooks.example.com/fleetwatch/{alertname}      # {model_version}
      dashboard: https://grafana.example.com/d/fw-model?var-model={model} # {backend} {team}
      autoscaler: https://grafana.example.com/d/fw-autoscaling?var-model={model}
    platform:
      team: platform              # owns sidecar/upstream/GPU alerts and unowned models
      sidecar_job: fleetwatch     # the Prometheus job scraping the sidecars (up{job=…})
      sidecar_down: {for: 2m, severity: page}
      upstream_down: {for: 2m, severity: page}
      engine_frozen: {for: 2m, severity: page}  # counters still while requests run or wait
      model_not_ready:            # start-up allowance per latency tier (LLMs load slowly)
        severity: page
        startup_allowance: {default: 10m, interactive: 5m, streaming: 30m}
      queue_wait: {seconds: 1, for: 10m, severity: ticket}
      kv_cache: {usage_ratio: 0.95, for: 10m, severity: ticket}
      gpu_memory: {usage_ratio: 0.95, for: 10m, severity: ticket}
      quota: {for: 15m, severity: ticket}          # a team above its quota (fleetwatch.gpu)
      unowned_model: {for: 15m, severity: ticket}  # policy: a model with no team
      placement_policy: {for: 15m, severity: ticket}  # an interactive model sharing a GPU
      rollout_memory: {for: 15m, severity: ticket}    # a second version would not fit
      rollout_worse: {for: 15m, severity: ticket}   # a candidate version worse by band
      config_drift: {for: 15m, severity: ticket}    # running configuration ≠ declared
    slo_alerts: {absent_for: 15m, misconfigured_for: 15m}
    routing: {group_by: [team, model], group_wait: 30s, group_interval: 5m,
              repeat_interval: 4h, resolve_timeout: 5m}
    prometheus_rule: {name: fleetwatch, namespace: monitoring, labels: {release: prom}}
    teams:                        # registry team → receiver names
      search: {page: search-pager, ticket: search-tickets}
    default: {page: platform-pager, ticket: platform-tickets}   # unowned / unknown teams
    receivers:                    # Alertmanager receivers, integrations passed through
      search-pager:
        pagerduty_configs: [{routing_key: "…"}]
      search-tickets:
        webhook_configs: [{url: "https://tickets.example.com/hook/search"}]

Only the receivers' integration bodies (``webhook_configs: [...]`` etc.) are passed to
Alertmanager as they are (``amtool check-config`` validates them); everything else is
checked here. Errors raise :class:`AlertingConfigError` naming the file and the field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleetwatch.alerts.numbers import window
from fleetwatch.slo.durations import parse_duration
from fleetwatch.specfile import read_yaml, validate

#: Placeholders a URL template may use, and the alert label each stands for.
URL_PLACEHOLDERS = ("alertname", "slo", "model", "model_version", "backend", "team")
#: Alertmanager receiver integrations accepted in ``receivers:`` (Alertmanager 0.25).
INTEGRATIONS = ("email_configs", "opsgenie_configs", "pagerduty_configs", "pushover_configs",
                "slack_configs", "sns_configs", "telegram_configs", "victorops_configs",
                "webex_configs", "webhook_configs", "wechat_configs")
Severity = Literal["page", "ticket"]
_NAME = r"^[A-Za-z0-9_.:-]+$"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_K8S_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_K8S_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


class AlertingConfigError(ValueError):
    """An invalid alerting configuration; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _duration(v: object) -> str:
    """Normalize a duration (``"120s"``, ``"2m"``, 120) to Prometheus text (``2m``)."""
    return window(parse_duration(v))  # type: ignore[arg-type]


class URLTemplates(_Strict):
    """Annotation URL templates; ``{placeholder}`` become the alert's labels."""

    runbook: str | None = None
    dashboard: str | None = None
    autoscaler: str | None = None

    @field_validator("runbook", "dashboard", "autoscaler")
    @classmethod
    def _placeholders(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if "{{" in v or "}}" in v:
            raise ValueError("use {placeholder} (e.g. {model}), not Go templates")
        stripped = _PLACEHOLDER.sub("", v)
        if "{" in stripped or "}" in stripped:
            raise ValueError("unbalanced { or }")
        for name in _PLACEHOLDER.findall(v):
            if name not in URL_PLACEHOLDERS:
                raise ValueError(f"unknown placeholder {{{name}}}; use one of "
                                 + ", ".join("{" + p + "}" for p in URL_PLACEHOLDERS))
        return v


class Timed(_Strict):
    """An alert that fires after its condition held ``for`` a while."""

    for_: str = Field("2m", alias="for")
    severity: Severity = "page"

    @field_validator("for_", mode="before")
    @classmethod
    def _dur(cls, v: object) -> str:
        return _duration(v)


class ModelNotReady(_Strict):
    """A model not ready for longer than its latency tier's start-up allowance.
    ``startup_allowance`` maps tiers to durations and must have ``default``."""

    severity: Severity = "page"
    startup_allowance: dict[str, str] = Field(default_factory=lambda: {
        "default": "10m", "interactive": "5m", "batch": "15m", "streaming": "30m"})

    @field_validator("startup_allowance", mode="before")
    @classmethod
    def _durs(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        if "default" not in v:
            raise ValueError("needs a 'default' allowance for tiers not listed")
        return {str(k): _duration(d) for k, d in v.items()}

    def allowance(self, tier: str) -> str:
        return self.startup_allowance.get(tier, self.startup_allowance["default"])


class QueueWait(Timed):
    """Mean queue wait (``model:modelserver_queue_duration_seconds:mean5m``) above ``seconds``."""

    for_: str = Field("10m", alias="for")
    severity: Severity = "ticket"
    seconds: float = Field(1.0, gt=0, allow_inf_nan=False)


class UsageRatio(Timed):
    """A usage ratio (KV cache, GPU memory) above ``usage_ratio``."""

    for_: str = Field("10m", alias="for")
    severity: Severity = "ticket"
    usage_ratio: float = Field(0.95, gt=0, le=1)


class Policy(Timed):
    """A governance alert (quotas, ownership, placement, rollout memory): a ticket."""
class RolloutWorse(Timed):
    """A rollout candidate worse than its baseline (``fleetwatch_rollout_verdict``)."""

    for_: str = Field("15m", alias="for")
    severity: Severity = "ticket"


class ConfigDrift(Timed):
    """A model's running configuration differs from its registry declaration
    (``fleetwatch_config_drift``): a ticket to its owner."""

    for_: str = Field("15m", alias="for")
    severity: Severity = "ticket"


class Platform(_Strict):
    """Platform alerts: who owns them and their thresholds."""

    team: str = Field("platform", pattern=_NAME)
    sidecar_job: str = Field("fleetwatch", min_length=1)
    sidecar_down: Timed = Timed()
    upstream_down: Timed = Timed()
    engine_frozen: Timed = Timed()
    model_not_ready: ModelNotReady = ModelNotReady()
    queue_wait: QueueWait = QueueWait()
    kv_cache: UsageRatio = UsageRatio()
    gpu_memory: UsageRatio = UsageRatio()
    quota: Policy = Policy()
    unowned_model: Policy = Policy()
    placement_policy: Policy = Policy()
    rollout_memory: Policy = Policy()
    rollout_worse: RolloutWorse = RolloutWorse()
    config_drift: ConfigDrift = ConfigDrift()


class SLOAlerts(_Strict):
    """SLO alert settings beyond the window catalog of the SLO file."""

    absent_for: str = "15m"
    absent_severity: Severity = "ticket"
    misconfigured_for: str = "15m"

    @field_validator("absent_for", "misconfigured_for", mode="before")
    @classmethod
    def _dur(cls, v: object) -> str:
        return _duration(v)


class Routing(_Strict):
    """Alertmanager route timing and grouping."""

    group_by: list[str] = Field(default_factory=lambda: ["team", "model"])
    group_wait: str = "30s"
    group_interval: str = "5m"
    repeat_interval: str = "4h"
    resolve_timeout: str = "5m"

    @field_validator("group_wait", "group_interval", "repeat_interval", "resolve_timeout",
                     mode="before")
    @classmethod
    def _dur(cls, v: object) -> str:
        return _duration(v)

    @field_validator("group_by")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        for label in v:
            if label != "..." and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label):
                raise ValueError(f"not a label name: {label!r}")
        return v


class PrometheusRuleMeta(_Strict):
    """Metadata of the generated prometheus-operator ``PrometheusRule``."""

    name: str = Field("fleetwatch", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    namespace: str | None = Field(None, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _k8s_labels(cls, v: dict[str, str]) -> dict[str, str]:
        """Kubernetes label syntax (the API server rejects the resource otherwise)."""
        for key, value in v.items():
            prefix, _, name = key.rpartition("/")
            if not (re.fullmatch(_K8S_NAME, name) and len(name) <= 63) or (
                    prefix and not (re.fullmatch(_K8S_PREFIX, prefix) and len(prefix) <= 253)):
                raise ValueError(f"label {key!r}: not a Kubernetes label key "
                                 "(e.g. release or example.com/team)")
            if value and not (re.fullmatch(_K8S_NAME, value) and len(value) <= 63):
                raise ValueError(f"label {key!r}: value {value!r} is not a Kubernetes label "
                                 "value (up to 63 letters, digits, - _ . inside)")
        return v


class TeamReceivers(_Strict):
    """Where a team's pages and tickets go (receiver names)."""

    page: str = Field(pattern=_NAME)
    ticket: str = Field(pattern=_NAME)


class AlertingConfig(_Strict):
    """The whole alerting configuration (see module docstring)."""

    urls: URLTemplates = URLTemplates()
    platform: Platform = Platform()
    slo_alerts: SLOAlerts = SLOAlerts()
    routing: Routing = Routing()
    prometheus_rule: PrometheusRuleMeta = PrometheusRuleMeta()
    teams: dict[str, TeamReceivers] = Field(default_factory=dict)
    default: TeamReceivers | None = None
    receivers: dict[str, dict[str, list[dict[str, Any]]]] = Field(default_factory=dict)

    @field_validator("receivers")
    @classmethod
    def _receivers(cls, v: dict[str, dict[str, list[Any]]]) -> dict[str, dict[str, list[Any]]]:
        for name, body in v.items():
            if not re.fullmatch(_NAME, name):
                raise ValueError(f"receiver name {name!r}: use letters, digits, _ . : -")
            for key in body:
                if key not in INTEGRATIONS:
                    raise ValueError(f"receiver {name!r}: unknown integration {key!r} "
                                     f"(one of {', '.join(INTEGRATIONS)})")
        return v

    @field_validator("teams")
    @classmethod
    def _team_names(cls, v: dict[str, TeamReceivers]) -> dict[str, TeamReceivers]:
        for team in v:
            if not re.fullmatch(_NAME, team):
                raise ValueError(f"team name {team!r}: use letters, digits, _ . : -")
        return v

    @model_validator(mode="after")
    def _known_receivers(self) -> AlertingConfig:
        refs = [(f"teams.{t}.{sev}", getattr(r, sev)) for t, r in sorted(self.teams.items())
                for sev in ("page", "ticket")]
        if self.default is not None:
            refs += [("default.page", self.default.page), ("default.ticket", self.default.ticket)]
        missing = [f"{where}: no receiver named {name!r}" for where, name in refs
                   if name not in self.receivers]
        if missing:
            raise ValueError("; ".join(missing))
        return self

    def team_receivers(self, team: str) -> TeamReceivers | None:
        """The receivers of ``team`` (None: it falls back to ``default``)."""
        return self.teams.get(team)


def parse_alerting_config(data: object, source: str = "<memory>") -> AlertingConfig:
    """Validate parsed YAML (None or ``{}`` = all defaults, no receivers)."""
    return validate(AlertingConfig, {} if data is None else data, source,
                    AlertingConfigError, "a mapping (receivers, teams, urls, …)")


def load_alerting_config(path: str | Path) -> AlertingConfig:
    """Read and validate an alerting configuration file; raises :class:`AlertingConfigError`,
    also for an empty file: a file named on the command line that holds nothing is a
    mistake (Alertmanager's own check refuses one too), not a request for the defaults."""
    data = read_yaml(path, AlertingConfigError, "alerting config")
    if data is None:
        raise AlertingConfigError(
            f"{Path(path)}: empty: an alerting configuration names the receivers "
            "(default:, teams:, …; examples/receivers.yaml, docs/alerts.md)")
    return parse_alerting_config(data, str(Path(path)))
