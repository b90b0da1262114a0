"""Alerting rules: SLO burn-rate alerts and platform alerts, as pure functions of the specs.

**SLO alerts** (one set per SLO, one rule per window pair — *burn tier* — of the catalog):

* ``FleetwatchSLORegression`` — a concurrency band **inside** the SLO's envelope burns
  faster than the tier's threshold over both its windows: the model got worse at a load it
  promises to handle. Severity is the tier's (``page``/``ticket``).
* ``FleetwatchSLOOverload`` — only bands **above** the envelope burn: the model is asked
  more than it promises; a ``ticket`` whose annotations point at the autoscaler.
* ``FleetwatchSLONoData`` — no sidecar exports the SLO's events at all (``absent``).
* ``FleetwatchSLOMisconfigured`` — the engine cannot evaluate the SLO on a model (e.g. the
  latency threshold is not a bucket boundary).

Every burn alert has ``burn_tier="<long>/<short>"`` so that Alertmanager inhibits slower
tiers while a faster one fires for the same SLO and model
(:func:`fleetwatch.alerts.alertmanager.inhibit_rules`).

**Platform alerts**: sidecar down (``up{job=<sidecar_job>}``), upstream down (per model the
target serves, so it can inhibit their SLO alerts), a model not ready longer than its latency
tier's start-up allowance, mean queue wait high, KV cache near exhaustion, GPU memory
headroom low.

**Owners**: ``team``, ``owner``, ``oncall`` are joined *at query time* from the sidecars'
``modelserver_model_info`` (:func:`fleetwatch.alerts.promql.with_owner`): a registry edit
takes effect without regenerating rules, globs cover models deployed later, and the labels
are those the sidecar actually applied. Series without registry data keep firing with
``team=<platform team>``. Two alerts cannot join: a model that is not ready has no metrics
(hence no info series) yet, so ``FleetwatchModelNotReady`` is generated per registry entry
with the entry's owners and its tier's ``for:``; ``FleetwatchSLONoData`` has no model at
all, so it takes the team the SLO's selector implies (else the platform team).
"""

from __future__ import annotations

import fnmatch
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.config import AlertingConfig, URLTemplates
from fleetwatch.alerts.numbers import (
    approx,
    burn_factor,
    dec,
    error_budget,
    human_duration,
    num,
    percent,
    window,
)
from fleetwatch.alerts.promql import (
    alternation,
    block,
    glob_regex,
    regex_escape,
    string,
    with_owner,
)
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.slo.bands import band_label
from fleetwatch.slo.spec import BurnWindow, SLOFile, SLOSpec

SLO_REGRESSION = "FleetwatchSLORegression"
SLO_OVERLOAD = "FleetwatchSLOOverload"
SLO_NO_DATA = "FleetwatchSLONoData"
SLO_MISCONFIGURED = "FleetwatchSLOMisconfigured"
SIDECAR_DOWN = "FleetwatchSidecarDown"
UPSTREAM_DOWN = "FleetwatchUpstreamDown"
MODEL_NOT_READY = "FleetwatchModelNotReady"
QUEUE_WAIT_HIGH = "FleetwatchQueueWaitHigh"
KV_CACHE_FULL = "FleetwatchKVCacheNearExhaustion"
GPU_MEMORY_LOW = "FleetwatchGPUMemoryHeadroomLow"

#: Alerts about SLOs (upstream-down inhibits these for the same model).
SLO_ALERTS = (SLO_REGRESSION, SLO_OVERLOAD, SLO_MISCONFIGURED)
BURN_ALERTS = (SLO_REGRESSION, SLO_OVERLOAD)

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule."""

    alert: str
    expr: str
    labels: Labels
    annotations: Labels
    for_: str | None = None


@dataclass(frozen=True)
class RuleGroup:
    """A Prometheus rule group."""

    name: str
    rules: tuple[rec.RecordingRule | AlertRule, ...]
    interval: str | None = None


# -- tiers ----------------------------------------------------------------------------------
def tier_name(w: BurnWindow) -> str:
    """The ``burn_tier`` label of a window pair: ``1h/5m``."""
    return f"{window(w.long)}/{window(w.short)}"


def ordered_tiers(windows: Iterable[BurnWindow]) -> list[BurnWindow]:
    """A window catalog from the fastest tier (shortest long window) to the slowest."""
    return sorted(windows, key=lambda w: (w.long, w.short))


# -- templates ------------------------------------------------------------------------------
def _l(label: str) -> str:
    return f"{{{{ $labels.{label} }}}}"


def literal(value: str) -> str:
    """``value`` as literal text of a Prometheus template (alert labels and annotations are
    Go templates): a registry or configuration value with ``{{`` — or a ``{`` that could
    meet one of the generator's own actions — becomes a string action, ``{{ "…" }}``, which
    renders as the value itself; anything else is written as it is."""
    return "{{ " + string(value) + " }}" if "{" in value else value


_VALUE = '{{ printf "%.3g" $value }}'
_PERCENT = "{{ $value | humanizePercentage }}"
#: Owner sentence: the joined registry labels, or a note when the model has none.
_OWNER = ("{{ with $labels.owner }}Owner {{ . }}, on-call {{ $labels.oncall }}."
          "{{ else }}No registry entry is known for this model.{{ end }}")
_MODEL = (f"{_l('model')}{{{{ with $labels.model_version }}}} version {{{{ . }}}}{{{{ end }}}} "
          f"on {_l('backend')}")


def _url(template: str, alertname: str, static: dict[str, str]) -> str:
    """A URL annotation: placeholders become the alert's labels, query-escaped (``urlquery``:
    a model ``a&b #c`` must not add a parameter or end the URL)."""
    out = template.replace("{alertname}", alertname)
    for name in ("slo", "model", "model_version", "backend", "team"):
        value = (urllib.parse.quote_plus(static[name]) if name in static
                 else f"{{{{ $labels.{name} | urlquery }}}}")
        out = out.replace("{" + name + "}", value)
    return out


def _annotations(urls: URLTemplates, alertname: str, summary: str, description: str,
                 static: dict[str, str] | None = None, autoscaler: bool = False) -> Labels:
    static = static or {}
    out = [("summary", summary), ("description", description)]
    if urls.runbook:
        out.append(("runbook_url", _url(urls.runbook, alertname, static)))
    if urls.dashboard:
        out.append(("dashboard_url", _url(urls.dashboard, alertname, static)))
    if autoscaler and urls.autoscaler:
        out.append(("autoscaler_url", _url(urls.autoscaler, alertname, static)))
    return tuple(out)


# -- SLO alerts -----------------------------------------------------------------------------
def inside_bands(slo: SLOSpec) -> list[str]:
    """Band labels inside the envelope (upper bound ≤ envelope), as the engine judges."""
    return [band_label(b) for b in slo.concurrency.bands if b <= slo.concurrency.envelope]


def _burning(slo: SLOSpec, w: BurnWindow, band_matcher: str) -> str:
    factor = num(burn_factor(w.budget_consumed, slo.period_seconds, w.long))
    sel = f'{{slo={string(slo.name)}, {band_matcher}}}'
    return (f"{rec.burn_rate(w.long)}{sel} > {factor}\n"
            f"and\n{rec.burn_rate(w.short)}{sel} > {factor}")


def _max_by_slo_model(expr: str) -> str:
    return f"max by ({', '.join(rec.SLO_MODEL)}) (\n{block(expr)}\n)"


def regression_expr(slo: SLOSpec, w: BurnWindow) -> str:
    """Bands inside the envelope burn over both windows (value: the long-window burn)."""
    inside = string(alternation([regex_escape(b) for b in inside_bands(slo)]))
    return _max_by_slo_model(_burning(slo, w, f"band=~{inside}"))


def overload_expr(slo: SLOSpec, w: BurnWindow) -> str:
    """Only bands above the envelope burn over both windows."""
    inside = [regex_escape(b) for b in inside_bands(slo)]
    above = string(alternation([*inside, "all"]))
    inside_m = string(alternation(inside))
    return (f"{_max_by_slo_model(_burning(slo, w, f'band!~{above}'))}\n"
            f"unless on ({', '.join(rec.SLO_MODEL)})\n"
            f"(\n{block(_burning(slo, w, f'band=~{inside_m}'))}\n)")


def slo_team(slo: SLOSpec, registry: Registry, platform_team: str) -> ModelEntry | str:
    """Who owns an SLO as a whole (for alerts without a model): the one registry entry
    or team its selector can match, else the platform team."""
    sel = slo.selector
    entries = []
    for e in registry.entries:
        if sel.teams and e.team not in sel.teams:
            continue
        if sel.latency_tiers and e.latency_tier not in sel.latency_tiers:
            continue
        if sel.models and not any(fnmatch.fnmatchcase(e.name, g) or fnmatch.fnmatchcase(g, e.name)
                                  for g in sel.models):
            continue
        entries.append(e)
    owners = {(e.team, e.owner, e.oncall) for e in entries}
    if len(owners) == 1:
        return entries[0]
    teams = {e.team for e in entries} | set(sel.teams)
    return teams.pop() if len(teams) == 1 else platform_team


def slo_alerts(slos: SLOFile, slo: SLOSpec, registry: Registry,
               cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """Every alert of one SLO: regression and overload per tier, no-data, misconfigured."""
    urls, team = cfg.urls, cfg.platform.team
    objective = percent(slo.objective)
    period = window(slo.period_seconds)
    envelope = num(slo.concurrency.envelope)
    static = {"slo": slo.name}
    rules: list[AlertRule] = []
    for w in ordered_tiers(slos.windows):
        factor = burn_factor(w.budget_consumed, slo.period_seconds, w.long)
        f, long, short, tier = approx(factor), window(w.long), window(w.short), tier_name(w)
        exhaust = human_duration(dec(slo.period_seconds) / factor)
        spent = percent(w.budget_consumed)
        burn = (f"burns the error budget of SLO {slo.name} (objective {objective} over "
                f"{period}) {_VALUE}x as fast as it can be afforded over the last {long}, and "
                f"faster than {f}x over the last {short} too")
        cost = (f"A {f}x burn spends {spent} of the budget in {long} and all of it in "
                f"{exhaust}.")
        impossible = (" Note: this tier can never fire, its threshold exceeds the largest "
                      "possible burn rate." if factor * error_budget(slo.objective) >= 1 else "")
        rules.append(AlertRule(
            SLO_REGRESSION, with_owner(regression_expr(slo, w), team),
            (("severity", w.severity), ("slo", slo.name), ("burn_tier", tier)),
            _annotations(
                urls, SLO_REGRESSION,
                f"SLO {slo.name} regression on {_l('model')}: error budget burning {_VALUE}x "
                f"within the concurrency envelope",
                f"Model {_MODEL} {burn}, in concurrency bands up to {envelope} requests per "
                f"replica (inside the SLO's envelope): a regression, not load; scaling out "
                f"will not fix it. {cost}{impossible} {_OWNER}",
                static)))
        rules.append(AlertRule(
            SLO_OVERLOAD, with_owner(overload_expr(slo, w), team),
            (("severity", "ticket"), ("slo", slo.name), ("burn_tier", tier)),
            _annotations(
                urls, SLO_OVERLOAD,
                f"SLO {slo.name} overload on {_l('model')}: error budget burning {_VALUE}x "
                f"only above the concurrency envelope",
                f"Model {_MODEL} {burn}, but only in concurrency bands above {envelope} "
                f"requests per replica (the SLO's envelope): overloaded, not broken. Scale "
                f"out: check the autoscaler (signal {rec.AUTOSCALING_SIGNAL}, desired "
                f"replicas = ceil of it; the sidecar serves /autoscaling/{_l('model')}), its "
                f"replica limits and the HPA/KEDA status. {cost}{impossible} {_OWNER}",
                static, autoscaler=True)))
    owner = slo_team(slo, registry, team)
    owner_labels = ((("team", literal(owner.team)), ("owner", literal(owner.owner)),
                     ("oncall", literal(owner.oncall)))
                    if isinstance(owner, ModelEntry) else (("team", literal(owner)),))
    rules.append(AlertRule(
        SLO_NO_DATA,
        f"absent(fleetwatch_slo_events_total{{slo={string(slo.name)}, band=\"all\"}})",
        (("severity", cfg.slo_alerts.absent_severity), ("slo", slo.name), *owner_labels),
        _annotations(
            urls, SLO_NO_DATA, f"SLO {slo.name} has no data",
            f"No sidecar exports fleetwatch_slo_events_total{{slo=\"{slo.name}\"}}: the "
            f"sidecars do not run the SLO engine with this SLO file, its selector matches no "
            f"registered model, or no selected model has had traffic. Without events the "
            f"burn-rate alerts of SLO {slo.name} cannot fire.", static),
        cfg.slo_alerts.absent_for))
    rules.append(AlertRule(
        SLO_MISCONFIGURED,
        with_owner(f"max by ({', '.join(rec.SLO_MODEL)}) (fleetwatch_slo_state"
                   f"{{slo={string(slo.name)}, state=\"misconfigured\"}}) == 1", team),
        (("severity", "ticket"), ("slo", slo.name)),
        _annotations(
            urls, SLO_MISCONFIGURED,
            f"SLO {slo.name} cannot be evaluated on {_l('model')}",
            f"The SLO engine cannot evaluate SLO {slo.name} on model {_MODEL} (e.g. its "
            f"latency threshold is not a bucket boundary of the source); its burn-rate alerts "
            f"cannot fire. The sidecar's /slo endpoint explains why. {_OWNER}", static),
        cfg.slo_alerts.misconfigured_for))
    return tuple(rules)


# -- platform alerts ------------------------------------------------------------------------
_GLOB_CHARS = re.compile(r"[*?\[]")


def _may_overlap(a: str, b: str) -> bool:
    """False when no model name can match both globs ``a`` and ``b`` (exact for a plain
    name; for two globs, when their literal prefixes or suffixes disagree), else True."""
    if not _GLOB_CHARS.search(a):
        return fnmatch.fnmatchcase(a, b)
    if not _GLOB_CHARS.search(b):
        return fnmatch.fnmatchcase(b, a)
    pa, pb = _GLOB_CHARS.split(a, 1)[0], _GLOB_CHARS.split(b, 1)[0]
    if not (pa.startswith(pb) or pb.startswith(pa)):
        return False
    # after the last *, ? or ], every character is literal (a later [ has no closing ])
    sa, sb = re.split(r"[*?\]]", a)[-1], re.split(r"[*?\]]", b)[-1]
    return sa.endswith(sb) or sb.endswith(sa)


def _not_ready_entries(registry: Registry) -> list[tuple[ModelEntry, list[ModelEntry]]]:
    """Registry entries by distinct name glob, each with the earlier entries whose names
    take precedence over some of its names (readiness has no version, so an entry is
    identified by its name). Earlier entries that cannot match any of its names are left
    out: with every earlier entry, 1000 entries made a 10 MB rule file."""
    out: list[tuple[ModelEntry, list[ModelEntry]]] = []
    seen: list[ModelEntry] = []
    names: set[str] = set()
    for e in registry.entries:
        if e.name in names:
            continue
        out.append((e, [s for s in seen if _may_overlap(s.name, e.name)]))
        seen.append(e)
        names.add(e.name)
    return out


def model_not_ready_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """One rule per registry name (with its owners and its tier's start-up allowance) and
    one for unregistered models (the default allowance, the platform team)."""
    settings = cfg.platform.model_not_ready
    ready = "fleetwatch_upstream_model_ready"
    target_up = "and on (job, instance, target) fleetwatch_upstream_up == 1"
    rules = []

    def rule(entry: str, match: str, earlier: list[str], tier: str, labels: Labels,
             who: str) -> AlertRule:
        expr = f"{ready}{{model=~{string(match)}}} == 0\n{target_up}"
        if earlier:
            expr += (f"\nunless on (model) {ready}"
                     f"{{model=~{string(alternation(earlier))}}}")
        allowance = settings.allowance(tier)
        return AlertRule(
            MODEL_NOT_READY, expr,
            (("severity", settings.severity), *((k, literal(v)) for k, v in labels),
             ("latency_tier", literal(tier)),
             *((("registry_entry", literal(entry)),) if entry else ())),
            _annotations(
                cfg.urls, MODEL_NOT_READY,
                f"Model {_l('model')} not ready for {allowance} on {_l('target')}",
                f"Model {_l('model')} has not been ready on target {_l('target')} (sidecar "
                f"{_l('instance')}) for {allowance}, the start-up allowance of latency tier "
                f"{literal(tier)}: it is failing to load or has become unhealthy. {who}"),
            allowance)

    for e, earlier in _not_ready_entries(registry):
        rules.append(rule(e.name, glob_regex(e.name), [glob_regex(x.name) for x in earlier],
                          e.latency_tier,
                          (("team", e.team), ("owner", e.owner), ("oncall", e.oncall)),
                          f"Owner {literal(e.owner)}, on-call {literal(e.oncall)}."))
    all_names = [glob_regex(e.name) for e, _ in _not_ready_entries(registry)]
    rules.append(rule("", ".+", all_names, "default", (("team", cfg.platform.team),),
                      "The model is not in the registry."))
    return tuple(rules)


def platform_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """Sidecar and upstream health, readiness, queue wait, KV cache and GPU memory."""
    p, urls, team = cfg.platform, cfg.urls, cfg.platform.team
    job = string(p.sidecar_job)
    team_label = (("team", team),)
    qw, kv, gpu = p.queue_wait, p.kv_cache, p.gpu_memory
    rules = [
        AlertRule(
            SIDECAR_DOWN, f"up{{job={job}}} == 0\nor\nabsent(up{{job={job}}})",
            (("severity", p.sidecar_down.severity), *team_label),
            _annotations(
                urls, SIDECAR_DOWN, f"fleetwatch sidecar {_l('instance')} is down",
                f"Prometheus cannot scrape the fleetwatch sidecar {_l('instance')} (job "
                f"{literal(p.sidecar_job)}), or finds no sidecar at all: the models behind it "
                f"have no metrics, SLO events or autoscaling signal."),
            p.sidecar_down.for_),
        AlertRule(
            UPSTREAM_DOWN,
            "group by (job, instance, target, model) (\n"
            "  fleetwatch_upstream_model_ready\n"
            "  and on (job, instance, target) fleetwatch_upstream_up == 0\n)\n"
            "or on (job, instance, target)\n(fleetwatch_upstream_up == 0)",
            (("severity", p.upstream_down.severity), *team_label),
            _annotations(
                urls, UPSTREAM_DOWN,
                f"Inference server {_l('target')} behind sidecar {_l('instance')} is down",
                f"The sidecar {_l('instance')} cannot scrape its upstream {_l('target')} "
                f"(model {_l('model')}); its series are withdrawn and the SLO alerts of its "
                f"models are inhibited while this fires. fleetwatch_upstream_scrape_errors_total"
                f" says why."),
            p.upstream_down.for_),
        *model_not_ready_alerts(registry, cfg),
        AlertRule(
            QUEUE_WAIT_HIGH,
            with_owner(f"{rec.latency('modelserver_queue_duration_seconds', 'mean')} > "
                       f"{num(qw.seconds)}", team),
            (("severity", qw.severity),),
            _annotations(
                urls, QUEUE_WAIT_HIGH,
                f"Queue wait of {_l('model')} is {_VALUE} s",
                f"Requests to model {_MODEL} wait {_VALUE} s on average in the scheduler "
                f"queue (over 5 minutes, all replicas), above {num(qw.seconds)} s for "
                f"{qw.for_}: more load than capacity, or a stuck batcher. {_OWNER}",
                autoscaler=True),
            qw.for_),
        AlertRule(
            KV_CACHE_FULL,
            with_owner(f"{rec.KV_CACHE_USAGE} > {num(kv.usage_ratio)}", team),
            (("severity", kv.severity),),
            _annotations(
                urls, KV_CACHE_FULL,
                f"KV cache of {_l('model')} is {_PERCENT} full",
                f"The KV cache of model {_MODEL} is {_PERCENT} "
                f"used on its fullest replica, above {percent(kv.usage_ratio)} for "
                f"{kv.for_}: requests will be preempted or queued. {_OWNER}",
                autoscaler=True),
            kv.for_),
        AlertRule(
            GPU_MEMORY_LOW,
            f"{rec.GPU_MEMORY_USAGE} > {num(gpu.usage_ratio)}",
            (("severity", gpu.severity), *team_label),
            _annotations(
                urls, GPU_MEMORY_LOW,
                f"GPU {_l('gpu_uuid')} memory is {_PERCENT} used",
                f"GPU {_l('gpu_uuid')} (seen by {_l('backend')}) has "
                f"{_PERCENT} of its memory in use, above "
                f"{percent(gpu.usage_ratio)} for {gpu.for_}: no headroom to load another "
                f"model or grow a KV cache."),
            gpu.for_),
    ]
    return tuple(rules)


# -- groups ---------------------------------------------------------------------------------
MODEL_RECORDING_GROUP = "fleetwatch-model-recording"
PLATFORM_GROUP = "fleetwatch-platform-alerts"


def model_recording_groups() -> list[RuleGroup]:
    return [RuleGroup(MODEL_RECORDING_GROUP, rec.MODEL_RULES)]


def slo_groups(slos: SLOFile, registry: Registry, cfg: AlertingConfig) -> list[RuleGroup]:
    """One group per SLO: its burn-rate recording rules, then its alerts. Rules of a group
    run in order, so the alerts see the burn rates of the same evaluation (in separate
    groups they would lag by up to one evaluation interval)."""
    windows = rec.burn_windows(slos)
    return [RuleGroup(f"fleetwatch-slo-{slo.name}",
                      (*rec.slo_rules(slo, windows), *slo_alerts(slos, slo, registry, cfg)))
            for slo in slos.slos]


def platform_groups(registry: Registry, cfg: AlertingConfig) -> list[RuleGroup]:
    return [RuleGroup(PLATFORM_GROUP, platform_alerts(registry, cfg))]
