"""``fleetwatch slo report``: the SLO engine's view, read back from Prometheus.

Queries a Prometheus that scrapes the sidecars (HTTP API ``/api/v1/query``) for the
engine's gauges and prints, per SLO, model and sidecar instance: state, error budget
remaining, capacity at SLO, observed concurrency and burn rates by window (overall and
per concurrency band) — as a rich table or JSON.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict

KEY = ("slo", "model", "model_version", "backend", "instance")


class ReportError(RuntimeError):
    """Prometheus could not be queried (message says which URL and why)."""


def query(base: str, promql: str, timeout: float = 10.0) -> list[dict]:
    """Instant query; returns the ``data.result`` vector. Raises :class:`ReportError`."""
    url = f"{base.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ReportError(f"cannot query Prometheus at {base}: {exc}") from None
    if body.get("status") != "success":
        raise ReportError(f"Prometheus at {base} answered {body.get('error', body)}")
    return body["data"]["result"]


def _value(sample: dict) -> float | None:
    v = float(sample["value"][1])
    return None if math.isnan(v) else v


def fetch_report(base: str, timeout: float = 10.0) -> list[dict]:
    """One dict per (SLO, model, version, backend, instance), sorted."""
    rows: dict[tuple, dict] = defaultdict(lambda: {"burn_rates": defaultdict(dict)})

    def key(m: dict) -> tuple:
        return tuple(m.get(k, "") for k in KEY)

    for s in query(base, "fleetwatch_slo_state == 1", timeout):
        rows[key(s["metric"])]["state"] = s["metric"]["state"]
    for name, field in (("fleetwatch_slo_error_budget_remaining_ratio", "budget_remaining"),
                        ("fleetwatch_slo_capacity_concurrency", "capacity")):
        for s in query(base, name, timeout):
            rows[key(s["metric"])][field] = _value(s)
    for s in query(base, "fleetwatch_slo_burn_rate", timeout):
        m = s["metric"]
        rows[key(m)]["burn_rates"][m["window"]][m["band"]] = _value(s)
    conc = {tuple(s["metric"].get(k, "") for k in KEY[1:]): _value(s)
            for s in query(base, "fleetwatch_slo_concurrency", timeout)}
    out = []
    for k in sorted(rows):
        row = {**dict(zip(KEY, k, strict=True)), **rows[k]}
        row["burn_rates"] = {w: dict(b) for w, b in row["burn_rates"].items()}
        row["concurrency"] = conc.get(k[1:])
        out.append(row)
    return out


def render_table(report: list[dict]) -> None:
    """Print the report with rich: one row per SLO/model/instance, overall burn rates by
    window, and the bands that burn faster than 1 in the longest window."""
    from rich.console import Console
    from rich.table import Table

    windows = sorted({w for r in report for w in r["burn_rates"]}, key=_window_seconds)
    table = Table(title="fleetwatch SLOs")
    for col in ("SLO", "model", "version", "instance", "state", "budget left", "capacity",
                "concurrency", *(f"burn {w}" for w in windows), "bands burning (longest)"):
        table.add_column(col)
    for r in report:
        burns = [_fmt(r["burn_rates"].get(w, {}).get("all")) for w in windows]
        longest = r["burn_rates"].get(windows[-1], {}) if windows else {}
        hot = ", ".join(b for b, v in longest.items() if b != "all" and v is not None and v > 1)
        table.add_row(r["slo"], r["model"], r["model_version"], r["instance"],
                      r.get("state", "?"), _fmt(r.get("budget_remaining"), pct=True),
                      _fmt(r.get("capacity")), _fmt(r.get("concurrency")), *burns, hot or "-")
    Console().print(table)


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v * 100:.1f}%" if pct else f"{v:.3g}"


def _window_seconds(w: str) -> float:
    from fleetwatch.slo.spec import parse_duration

    return parse_duration(w)
