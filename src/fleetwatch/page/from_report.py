"""The status page of a fleet from Prometheus: ``fleetwatch slo report`` rows plus a few
instant-query answers, mapped to a :class:`~fleetwatch.page.model.PageInput`.

Pure: :mod:`fleetwatch.commands.slo_html` runs :data:`PAGE_QUERIES` and hands the answers
here with the report rows (:func:`fleetwatch.slo.outputs.report.build_report`). Prometheus keeps
what the sidecars export, not the engine's sentences: a row's explanation names the bands
burning faster than 1 over the longest window; objectives, SLI kinds and thresholds are
not exported and are left out; there is no history (an instant query has none). Per-band
latency quantiles (``fleetwatch_slo_band_latency_quantile_seconds``) are used when the
sidecars export them.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from fleetwatch.page.model import ModelView, PageInput, TargetView, num
from fleetwatch.slo.judge.states import worst_state
from fleetwatch.slo.outputs.report import (
    KEY,
    ReportRow,
    Sample,
    sample_labels,
    sample_value,
    window_order,
)

INFO_QUERY = "modelserver_model_info"
UP_QUERY = "fleetwatch_upstream_up"
READY_QUERY = "fleetwatch_upstream_model_ready"
SIGNAL_QUERY = "fleetwatch_autoscaling_signal_ratio"
COMPONENT_QUERY = "fleetwatch_autoscaling_component_ratio"
BAND_LATENCY_QUERY = "fleetwatch_slo_band_latency_quantile_seconds"
BAND_CONCURRENCY_QUERY = "fleetwatch_slo_band_concurrency"
#: The instant queries the page needs besides the report's own.
PAGE_QUERIES = (INFO_QUERY, UP_QUERY, READY_QUERY, SIGNAL_QUERY, COMPONENT_QUERY,
                BAND_LATENCY_QUERY, BAND_CONCURRENCY_QUERY)
Answers = Mapping[str, Sequence[Sample]]
#: A model on one sidecar: (model, model_version, backend, instance).
ModelAt = tuple[str, str, str, str]


def _model_at(labels: Mapping[str, str]) -> ModelAt:
    return (labels.get("model", ""), labels.get("model_version", ""),
            labels.get("backend", ""), labels.get("instance", ""))


def targets(answers: Answers) -> list[TargetView]:
    """Every (sidecar instance, target) with ``fleetwatch_upstream_up``; ready when up
    and every model it reports ready is; ``required`` is not exported (None)."""
    not_ready: dict[tuple[str, str], list[str]] = defaultdict(list)
    for s in answers.get(READY_QUERY, ()):
        lab = sample_labels(s)
        if sample_value(s) != 1.0:
            not_ready[(lab.get("instance", ""), lab.get("target", ""))].append(
                lab.get("model", ""))
    out: list[TargetView] = []
    for s in answers.get(UP_QUERY, ()):
        lab = sample_labels(s)
        key = (lab.get("instance", ""), lab.get("target", ""))
        up = sample_value(s) == 1.0
        out.append({"name": " / ".join(k for k in key if k), "kind": "", "up": up,
                    "ready": up and not not_ready[key], "required": None, "error": None,
                    "models_not_ready": sorted(not_ready[key]), "models_sleeping": []})
    return sorted(out, key=lambda t: t["name"])


def models(answers: Answers) -> list[ModelView]:
    """Every ``modelserver_model_info`` series: the model, where it runs and its registry
    and engine labels."""
    out: list[ModelView] = []
    for s in answers.get(INFO_QUERY, ()):
        lab = sample_labels(s)
        where = " / ".join(x for x in (lab.get("instance", ""), lab.get("target", "")) if x)
        out.append({"model": lab.get("model", ""), "model_version": lab.get("model_version", ""),
                    "backend": lab.get("backend", ""), "runtime": lab.get("runtime", ""),
                    "target": where, "team": lab.get("team", ""), "owner": lab.get("owner", ""),
                    "oncall": lab.get("oncall", ""), "latency_tier": lab.get("latency_tier", ""),
                    "engine_version": lab.get("engine_version", ""),
                    "quantization": lab.get("quantization", "")})
    return sorted(out, key=lambda m: (m["model"], m["model_version"], m["target"]))


def _band_latency(answers: Answers) -> dict[tuple[str, ...], dict[str, dict[str, Any]]]:
    """Report key → band → ``{quantile, latency_seconds, concurrency}``."""
    out: dict[tuple[str, ...], dict[str, dict[str, Any]]] = defaultdict(dict)
    for query, field in ((BAND_LATENCY_QUERY, "latency_seconds"),
                         (BAND_CONCURRENCY_QUERY, "concurrency")):
        for s in answers.get(query, ()):
            lab = sample_labels(s)
            if "band" not in lab:
                continue
            band = out[tuple(lab.get(k, "") for k in KEY)].setdefault(
                lab["band"], {"quantile": None, "latency_seconds": None, "concurrency": None})
            band[field] = sample_value(s)
            if "objective_quantile" in lab:
                with contextlib.suppress(ValueError):
                    band["quantile"] = float(lab["objective_quantile"])
    return out


def slo_rows(report: Sequence[ReportRow], answers: Answers) -> list[dict[str, Any]]:
    """The report rows as ``/slo``-shaped rows (``error_budget_remaining``, an
    explanation from the longest window's burning bands, ``band_latency`` when exported)."""
    lat = _band_latency(answers)
    out: list[dict[str, Any]] = []
    for r in report:
        burn = r.get("burn_rates", {})
        windows = sorted(burn, key=window_order)
        longest = burn.get(windows[-1], {}) if windows else {}
        hot = [b for b, v in longest.items() if b != "all" and v is not None and v > 1]
        explanation = (f"bands burning faster than 1 over {windows[-1]}: {', '.join(hot)}"
                       if hot else "no band burns faster than 1 over the longest window"
                       if windows else "no burn rates exported yet")
        row: dict[str, Any] = {**r, "error_budget_remaining": r.get("budget_remaining"),
                               "explanation": explanation}
        key = tuple(str(r.get(k, "")) for k in KEY)
        if key in lat:
            row["band_latency"] = lat[key]
        out.append(row)
    return out


def signals(report: Sequence[ReportRow], answers: Answers) -> list[dict[str, Any]]:
    """Per model and sidecar instance: signal, components, the worst state and smallest
    capacity over its SLO rows, its concurrency."""
    rows: dict[ModelAt, dict[str, Any]] = {}
    for s in answers.get(SIGNAL_QUERY, ()):
        lab = sample_labels(s)
        m, v, b, inst = _model_at(lab)
        rows[(m, v, b, inst)] = {"model": m, "model_version": v, "backend": b,
                                 "instance": inst, "signal": sample_value(s),
                                 "components": {}, "capacity": None, "concurrency": None,
                                 "state": "no_data"}
    for s in answers.get(COMPONENT_QUERY, ()):
        lab = sample_labels(s)
        key = _model_at(lab)
        if key in rows and "component" in lab and sample_value(s) is not None:
            rows[key]["components"][lab["component"]] = sample_value(s)
    by_model: dict[ModelAt, list[ReportRow]] = defaultdict(list)
    for r in report:
        by_model[_model_at({k: str(r.get(k, "")) for k in KEY})].append(r)
    for key, obj in rows.items():
        mine = by_model.get(key, [])
        caps = [c for r in mine if (c := num(r.get("capacity"))) is not None]
        obj["capacity"] = min(caps) if caps else None
        obj["concurrency"] = next((r.get("concurrency") for r in mine), None)
        obj["state"] = worst_state({str(r.get("state")) for r in mine if r.get("state")})
    return [rows[k] for k in sorted(rows)]


def report_page(report: Sequence[ReportRow], answers: Answers, base: str,
                now: float | None = None) -> PageInput:
    """The page of a fleet as Prometheus at ``base`` saw it at ``now`` (Unix seconds)."""
    now = time.time() if now is None else now
    return {"title": "fleetwatch SLO report", "source": f"Prometheus {base}",
            "generated": now, "updated": now, "targets": targets(answers),
            "models": models(answers), "slos": slo_rows(report, answers),
            "autoscaling": signals(report, answers), "history": {}, "thresholds": {},
            "links": [], "refresh_seconds": 0.0,
            "history_note": "no history: a report holds Prometheus' instant values "
                            "(the Grafana dashboards have the signal over time)",
            "configuration": []}
