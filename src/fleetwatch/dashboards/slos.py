"""Dashboard 3 — SLOs: one row per SLO of the SLO file, plus state, budgets and autoscaling."""

from __future__ import annotations

import re

from grafanalib import core as g

from fleetwatch.alerts.numbers import approx, burn_factor, dec, num, percent
from fleetwatch.dashboards import names as n
from fleetwatch.dashboards import panels as p
from fleetwatch.dashboards.common import (
    INFO,
    MODEL_KEY,
    dashboard,
    datasource_variable,
    model_variable,
    slo_state_code,
    team_variable,
)
from fleetwatch.dashboards.interference import interference_row
from fleetwatch.dashboards.names import window
from fleetwatch.dashboards.panels import Q
from fleetwatch.promql import agg, by, rate, sel
from fleetwatch.slo.spec import LATENCY_METRICS, BurnWindow, SLOFile, SLOSpec

MODEL = {"model": "$model"}
V = "{{model}} v{{model_version}}"
_METRIC_TEXT = {"ttft": "time to first token", "itl": "inter-token latency",
                "tpot": "time per output token", "request": "request latency",
                "queue": "queue wait"}


def seconds(value: float) -> str:
    """``0.5`` → ``500 ms``, ``2.5`` → ``2.5 s``: exact, as the SLO file says it."""
    return f"{num(dec(value) * 1000)} ms" if value < 1 else f"{num(value)} s"


def factor(w: BurnWindow, s: SLOSpec) -> str:
    """A tier's burn-rate threshold for an SLO, as the alert annotations write it."""
    return approx(burn_factor(w.budget_consumed, s.period_seconds, w.long))


#: Markdown (and Grafana) syntax in SLO file text: escaped so that a description or a
#: selector renders as written, in its table cell.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~<>&])")


def md(text: str) -> str:
    """``text`` as literal markdown inside a table cell: markdown punctuation escaped (``|``
    no longer ends the cell, ``[[x]]`` is not a Grafana variable), line breaks as spaces,
    and ``$`` as ``&#36;`` so that Grafana does not interpolate ``$model``."""
    text = re.sub(r"\r\n|[\r\n\u2028\u2029\x85]", " ", text)
    return _MD_SPECIAL.sub(r"\\\1", text).replace("$", "&#36;")


def sli_text(slo: SLOSpec) -> str:
    """The SLI in words: "time to first token ≤ 500 ms", "successful requests", …"""
    sli = slo.sli
    if sli.latency or sli.goodput:  # goodput: every objective of one request (traces)
        return " and ".join(f"{_METRIC_TEXT[o.metric]} ≤ {seconds(o.threshold_seconds)}"
                            for o in sli.objectives())
    if sli.timeslice:
        ts = sli.timeslice
        return (f"intervals whose {ts.statistic} {_METRIC_TEXT[ts.metric]} ≤ "
                f"{seconds(ts.threshold_seconds)}")
    return "successful requests"


def covered(expr: str, slo: SLOSpec) -> str:
    """Keep the per-model series of ``expr`` whose model the SLO covers (has a state for)."""
    return (f"({expr}) and on {by(MODEL_KEY)} "
            f"{sel('fleetwatch_slo_state', eq={'slo': slo.name})}")


def _fmt_band(b: float) -> str:
    return num(b)


def catalog_markdown(slos: SLOFile) -> str:
    """The SLO file as markdown tables (what each SLO promises, and its alert windows)."""
    lines = ["| SLO | SLI (good events) | Objective | Period | Method | Envelope | Bands | "
             "Selector |", "|---|---|---|---|---|---|---|---|"]
    for s in slos.slos:
        sel_parts = [f"{k}: {', '.join(md(x) for x in v)}" for k, v in (
            ("models", s.selector.models), ("teams", s.selector.teams),
            ("tiers", s.selector.latency_tiers)) if v]
        lines.append(
            f"| **{md(s.name)}** {md(s.description)} | {sli_text(s)} | {percent(s.objective)} | "
            f"{window(s.period_seconds)} | {s.budgeting_method} | "
            f"{_fmt_band(s.concurrency.envelope)} | "
            f"{', '.join(_fmt_band(b) for b in s.concurrency.bands)} | "
            f"{'; '.join(sel_parts) or 'every model'} |")
    lines += ["", "| Alert windows (long / short) | Budget consumed | Severity | "
              "Burn-rate threshold per SLO |", "|---|---|---|---|"]
    for w in slos.windows:
        factors = ", ".join(f"{md(s.name)}: {factor(w, s)}×" for s in slos.slos)
        lines.append(f"| {w.name} | {percent(w.budget_consumed)} | {w.severity} | {factors} |")
    lines += ["", "A burn inside the concurrency envelope is a **regression** (page the "
              "owner); a burn only above it is **overload** (scale out). Capacity at SLO "
              "starts at the envelope; a band burning over "
              f"{window(slos.capacity.window)} lowers it below that band, good bands above "
              "raise it, and the latency model places it between good and burning load."]
    return "\n".join(lines) + "\n"


def _overview(grid: p.Grid, slos: SLOFile) -> None:
    grid.row("SLOs")
    grid.add(p.text("SLO catalog", catalog_markdown(slos),
                    "The SLO file these dashboards were generated from."), 24, 8)
    grid.add(p.table(
        "State", "Current state of every SLO on every model and version: ok, regression "
        "(burn inside the concurrency envelope: page), interference / gpu_degraded (such a "
        "burn blamed on a co-located model or the GPU: platform ticket), overload (burn "
        "only above it: scale out), no_data, misconfigured (e.g. the threshold is not a "
        "bucket boundary).",
        [Q(agg("max", ("slo", *MODEL_KEY, "state"),
               sel("fleetwatch_slo_state", re_=MODEL)) + " == 1", instant=True, table=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True},
            "renameByName": {"model_version": "version"}}}],
        overrides=[p.override("state", custom_displayMode="color-text", mappings=[
            {"type": "value", "options": {k: {"text": k, "color": c, "index": i}
                                          for i, (k, c) in enumerate((
                                              ("ok", p.GREEN), ("overload", p.ORANGE),
                                              ("regression", p.RED),
                                              ("interference", p.BLUE),
                                              ("gpu_degraded", p.YELLOW),
                                              ("no_data", p.GREY),
                                              ("misconfigured", p.PURPLE)))}}])]), 12, 8)
    grid.add(p.bargauge(
        "Error budget remaining", "Share of each SLO's error budget left over its period "
        "(fleet-wide: events summed over replicas); negative when overspent.",
        [Q(sel(n.ERROR_BUDGET_REMAINING, re_=MODEL), "{{slo}} " + V, instant=True)],
        p.RATIO, thresholds=p.steps((p.RED, None), (p.ORANGE, 0), (p.GREEN, 0.25)), min_=-1),
        12, 8)


def _slo_row(grid: p.Grid, slos: SLOFile, s: SLOSpec) -> None:
    eq = {"slo": s.name}
    period = window(s.period_seconds)
    grid.row(f"{s.name}: {sli_text(s)} — {percent(s.objective)} over {period}",
             description=md(s.description))
    grid.add(p.state_timeline(
        "State", f"State of {s.name} per model over time (highest severity over replicas): "
        "regression pages the owner, overload asks for more replicas.",
        [Q(slo_state_code(MODEL, eq=eq), V)], mappings=p.value_map(p.STATE_CODES)), 12, 6)
    grid.add(p.timeseries(
        "Error budget remaining", f"Share of the {period} error budget left "
        f"(objective {percent(s.objective)}; events summed over replicas).",
        [Q(sel(n.ERROR_BUDGET_REMAINING, eq=eq, re_=MODEL), V)], p.RATIO,
        thresholds=p.steps((p.RED, None), (p.ORANGE, 0), (p.GREEN, 0.25))), 6, 6)
    good = agg("sum", MODEL_KEY, rate(sel("fleetwatch_slo_good_events_total",
                                          eq={**eq, "band": "all"}, re_=MODEL)))
    total = agg("sum", MODEL_KEY, rate(sel("fleetwatch_slo_events_total",
                                           eq={**eq, "band": "all"}, re_=MODEL)))
    grid.add(p.timeseries(
        "SLI", f"Good ÷ all events over 5 minutes ({sli_text(s)}); the line is the "
        f"objective, {percent(s.objective)}.",
        [Q(f"{good} / {total}", V)], p.RATIO,
        thresholds=p.steps((p.RED, None), (p.GREEN, s.objective))), 6, 6)

    windows = sorted({min(w.short for w in slos.windows)} | {w.long for w in slos.windows})
    factors = {w.long: w.factor(s.period_seconds) for w in slos.windows}
    page = max((w.factor(s.period_seconds) for w in slos.windows if w.severity == "page"),
               default=max(factors.values()))
    explain = "; ".join(f"{w.name}: {factor(w, s)}× ({w.severity})"
                        for w in slos.windows)
    grid.add(p.timeseries(
        "Burn rate by window", "Overall burn rate (error rate ÷ error budget, all bands) over "
        f"each window; 1 = the budget lasts exactly {period}. Alert when both windows of a "
        f"pair exceed its threshold — {explain}.",
        [Q(sel(n.burn_rate(w), eq={**eq, "band": "all"}, re_=MODEL),
           f"{V} {window(w)}") for w in windows], p.BURN,
        thresholds=p.steps((p.GREEN, None), (p.ORANGE, 1), (p.RED, page))), 12)
    cap_w = slos.capacity.window
    band_burn = sel(n.burn_rate(cap_w), eq=eq, re_=MODEL, ne={"band": "all"})
    envelope = s.concurrency.envelope
    grid.add(p.timeseries(
        "Burn by concurrency band", f"Burn rate over {window(cap_w)} of the events "
        "that happened while per-replica concurrency was in each band (label: the band's "
        f"upper bound). Bands up to the envelope ({_fmt_band(envelope)}) burning is a "
        "regression; only bands above it burning is overload.",
        [Q(band_burn, f"{V} ≤{{{{band}}}}")], p.BURN,
        thresholds=p.steps((p.GREEN, None), (p.RED, 1))), 6)
    grid.add(p.bargauge(
        "Burn by band now", f"Current burn rate over {window(cap_w)} per "
        "concurrency band (highest over models): where the SLO starts to break as load "
        "grows.",
        [Q(agg("max", ("band",), band_burn), "≤{{band}}", instant=True)], p.BURN,
        thresholds=p.steps((p.GREEN, None), (p.RED, 1))), 6)
    grid.add(p.timeseries(
        "Capacity at SLO vs observed concurrency", "Capacity at SLO (per replica: starts at "
        "the declared envelope, a burning band lowers it, good bands above raise it, the "
        "capacity model places it between good and burning load) and the model's prediction, "
        "against the concurrency observed per replica (highest replica). The line is the "
        f"declared envelope, {_fmt_band(envelope)}.",
        [Q(agg("max", MODEL_KEY, sel("fleetwatch_slo_capacity_concurrency", eq=eq,
                                     re_=MODEL)), "capacity " + V),
         Q(agg("max", MODEL_KEY, sel("fleetwatch_slo_capacity_predicted_concurrency",
                                     eq=eq, re_=MODEL)), "predicted " + V),
         Q(covered(agg("max", MODEL_KEY, sel("fleetwatch_slo_concurrency", re_=MODEL)), s),
           "observed " + V)], p.REQUESTS,
        thresholds=p.steps((p.GREEN, None), (p.ORANGE, envelope)),
        conditional="needs a band of this SLO that burned for the prediction (B): the "
                    "capacity model then places capacity between good and burning load."), 12)
    if s.sli.latency:
        _latency_vs_concurrency(grid, s, eq)
        metric = LATENCY_METRICS[s.sli.latency.metric]
        grid.add(p.timeseries(
            "p99 against the threshold", f"p99 of {_METRIC_TEXT[s.sli.latency.metric]} from "
            "histogram buckets over 5 minutes; the line is the SLO threshold.",
            [Q(covered(f"{sel(n.latency(metric, 'p99'), re_=MODEL)} >= 0", s), V)],
            p.SECONDS,
            thresholds=p.steps((p.GREEN, None),
                               (p.RED, s.sli.latency.threshold_seconds))), 12)


def _latency_vs_concurrency(grid: p.Grid, s: SLOSpec, eq: dict[str, str]) -> None:
    """Latency against concurrency: the objective's quantile per band (bands ascending:
    concurrency grows to the right), coloured against the threshold, and the capacity."""
    assert s.sli.latency is not None
    q = format(s.objective, "g")
    grid.add(p.bargauge(
        "Latency vs concurrency", f"p{format(s.objective * 100, 'g')} of "
        f"{_METRIC_TEXT[s.sli.latency.metric]} per concurrency band (label: the band's "
        "upper bound; highest over models), ascending: the capacity model's points. Red "
        "from the SLO threshold, "
        f"{seconds(s.sli.latency.threshold_seconds)}; capacity at SLO is where it is "
        "crossed (next panel).",
        [Q(agg("max", ("band",), sel("fleetwatch_slo_band_latency_quantile_seconds",
                                     eq={**eq, "objective_quantile": q}, re_=MODEL)),
           "≤{{band}}", instant=True)], p.SECONDS,
        thresholds=p.steps((p.GREEN, None), (p.RED, s.sli.latency.threshold_seconds))), 6)
    grid.add(p.stat(
        "Capacity at SLO", "Per-replica concurrency at which the latency quantile reaches "
        "the threshold (the adopted capacity; lowest over models and replicas).",
        [Q(agg("min", ("slo",), sel("fleetwatch_slo_capacity_concurrency", eq=eq,
                                    re_=MODEL)), "capacity", instant=True)], p.REQUESTS), 6)


def _autoscaling(grid: p.Grid) -> None:
    grid.row("Autoscaling")
    grid.add(p.timeseries(
        "Autoscaling signal", "The largest autoscaling component, summed over replicas: with "
        "a KEDA/HPA AverageValue target of 1, desired replicas = ceil(signal). Above the "
        "line the model needs more replicas.",
        [Q(sel(n.AUTOSCALING_SIGNAL, re_=MODEL), V)], p.NONE,
        thresholds=p.steps((p.GREEN, None), (p.RED, 1))), 8)
    replicas = ("count by (model) (" + agg("group", ("model", "instance"), sel(
        INFO, re_=MODEL)) + ")")
    grid.add(p.timeseries(
        "Desired vs current replicas", "ceil(Σ autoscaling signal) per model against the "
        "sidecar instances that serve it now.",
        [Q("ceil(" + agg("sum", ("model",), sel(n.AUTOSCALING_SIGNAL, re_=MODEL)) + ")",
           "desired {{model}}"),
         Q(replicas, "current {{model}}")], p.REPLICAS), 8)
    grid.add(p.timeseries(
        "Signal components", "Each component per replica (highest replica): concurrency ÷ "
        "capacity at SLO, mean queue wait ÷ target, KV-cache usage ÷ target, GPU-memory "
        "usage ÷ target. The signal is the largest.",
        [Q(agg("max", (*MODEL_KEY, "component"),
               sel("fleetwatch_autoscaling_component_ratio", re_=MODEL)),
           V + " {{component}}")], p.NONE,
        thresholds=p.steps((p.GREEN, None), (p.RED, 1))), 8)


def build_slo_dashboard(slos: SLOFile) -> g.Dashboard:
    grid = p.Grid()
    _overview(grid, slos)
    for s in slos.slos:
        _slo_row(grid, slos, s)
    interference_row(grid, MODEL)
    _autoscaling(grid)
    return dashboard(
        "slos", "Per SLO and model: objective, SLI, error budget, burn rate by window and by "
        "concurrency band, capacity at SLO against observed concurrency, state, and the "
        "autoscaling signal. Generated from the SLO file by `fleetwatch dashboards`; do not "
        "edit.", grid.panels(), [datasource_variable(), team_variable(), model_variable()])
