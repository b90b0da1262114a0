"""The status page as one HTML document: :func:`render_page`.

Sections (each a ``<section id=…>``): ``targets`` (health), ``models`` (registry and
engine facts), ``slos`` (per SLO and model: state and explanation, budget remaining, the
burn heat map, latency or burn against concurrency with the threshold and capacity),
``configuration`` (drifts from the registry's declaration and lint findings, when there
are any), ``autoscaling`` (signal, components, history) and ``links``. A large fleet gets cards for
its :data:`MAX_CARDS` worst SLO rows only. Numbers are shown as
:func:`~fleetwatch.page.model.number` writes them and carried exactly in ``data-*``
attributes. Styles are inline; there is no script and no external reference.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence

from fleetwatch.page import svg
from fleetwatch.page.model import (
    ConfigRow,
    HistoryPoint,
    ModelView,
    PageInput,
    Row,
    TargetView,
    model_label,
    num,
    number,
    text,
)
from fleetwatch.slo.judge.states import SEVERITY

#: SLO rows drawn as cards (heat map and chart) at most, worst states first: a page of a
#: large fleet stays small enough to load; the summary table lists every row.
MAX_CARDS = 40

STYLE = """
:root{--ok:#15803d;--bad:#b91c1c;--warn:#c2410c;--muted:#6b7280;--line:#e5e7eb}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
margin:0;color:#111827;background:#f8fafc}
header{background:#0f172a;color:#f8fafc;padding:12px 24px;display:flex;flex-wrap:wrap;
gap:6px 24px;align-items:baseline}
header h1{font-size:18px;margin:0}header a{color:#93c5fd}
main{padding:8px 24px 32px;max-width:1280px}
section{margin-top:20px}h2{font-size:16px;margin:0 0 8px;border-bottom:1px solid var(--line)}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}td.k{white-space:nowrap}
th{font-weight:600;color:#374151;background:#f1f5f9;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.state{display:inline-block;padding:0 8px;border-radius:9px;font-weight:600;color:#fff;
background:var(--muted)}
.state-ok{background:var(--ok)}.state-regression{background:var(--bad)}
.state-overload{background:var(--warn)}.state-misconfigured{background:#7c3aed}
.state-interference{background:#2563eb}.state-gpu_degraded{background:#a16207}
.yes{color:var(--ok);font-weight:600}.no{color:var(--bad);font-weight:600}
.muted{color:var(--muted)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:12px}
.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:10px 12px}
.card h3{font-size:15px;margin:0 0 4px;overflow-wrap:anywhere}
.explanation{margin:4px 0 8px}.facts{color:#374151;margin:0 0 8px}
svg text{font:11px system-ui,"DejaVu Sans",sans-serif}
svg .ax{fill:#4b5563}svg .plot{fill:#f8fafc;stroke:#d1d5db}
svg .threshold{stroke:#dc2626;stroke-dasharray:5 3}svg .thr{fill:#b91c1c}
svg .capacity{stroke:#2563eb;stroke-width:2}svg text.capacity{fill:#1d4ed8;stroke:none}
svg .predicted{stroke:#7c3aed;stroke-dasharray:2 2}svg text.predicted{fill:#6d28d9;stroke:none}
svg .now{stroke:#111827;stroke-dasharray:1 3}svg text.now{fill:#111827;stroke:none}
svg .series{fill:none;stroke:#0f766e;stroke-width:2}svg .pt{fill:#0f766e}
svg .tick{stroke:#111827}
.legend span{display:inline-block;padding:0 6px;margin-right:2px;border-radius:3px}
"""


def _yes_no(flag: bool, yes: str = "yes", no: str = "no") -> str:
    return f'<span class="yes">{yes}</span>' if flag else f'<span class="no">{no}</span>'


def _stamp(ts: float | None) -> str:
    if ts is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], empty: str,
           nowrap: Collection[int] = ()) -> str:
    """A table of cells that are HTML already (escaped by the caller); the cells of the
    ``nowrap`` columns (short words, states, numbers) never wrap, the others wrap
    anywhere (a long hostile name cannot widen the page)."""
    if not rows:
        return f'<p class="muted">{text(empty)}</p>'
    head = "".join(f"<th>{text(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f'<td class="k">{c}</td>' if j in nowrap else
                                    f"<td>{c}</td>" for j, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_REQUIRED = {True: "required", False: '<span class="muted">optional</span>', None: "-"}


def targets_section(targets: Sequence[TargetView]) -> str:
    """Every target: kind, up, ready, required, the last error, models not ready."""
    rows = [[text(t["name"]), text(t["kind"] or "-"), _yes_no(t["up"], "up", "down"),
             _yes_no(t["ready"], "ready", "not ready"), _REQUIRED[t["required"]],
             text(t["error"] or ""),
             text(", ".join(t["models_not_ready"])), text(", ".join(t["models_sleeping"]))]
            for t in targets]
    return ('<section id="targets"><h2>Targets</h2>'
            + _table(["target", "kind", "up", "ready", "required", "last error",
                      "models not ready", "asleep"], rows, "no targets", nowrap=(1, 2, 3, 4))
            + "</section>")


def models_section(models: Sequence[ModelView]) -> str:
    """Every served model with team, owner, on-call, tier, engine version, quantization."""
    rows = [[text(m["model"]), text(m["model_version"]), text(m["backend"]),
             text(m["runtime"]), text(m["team"] or "unregistered"), text(m["owner"]),
             text(m["oncall"]), text(m["latency_tier"]), text(m["engine_version"]),
             text(m["quantization"]), text(m["target"])] for m in models]
    return ('<section id="models"><h2>Models</h2>'
            + _table(["model", "version", "backend", "runtime", "team", "owner", "on-call",
                      "tier", "engine version", "quantization", "target"], rows,
                     "no models observed yet", nowrap=(2, 3, 7, 8, 9)) + "</section>")


def configuration_section(rows: Sequence[ConfigRow]) -> str:
    """Declared vs running and the model-configuration lint: one row per drifting field
    and per finding (no section when there is nothing to show: a source without them)."""
    if not rows:
        return ""
    cells = [[text(r["model"]), text(r["kind"]), text(r["what"]),
              f'<span class="no">{text(r["severity"])}</span>' if r["severity"] == "error"
              else text(r["severity"]), text(r["detail"])] for r in rows]
    return ('<section id="configuration"><h2>Configuration</h2><p class="muted">fields '
            "that differ from the registry's declaration, and model-configuration lint "
            "findings</p>"
            + _table(["model", "kind", "field or check", "severity", "detail"], cells,
                     "", nowrap=(1, 2, 3)) + "</section>")


def _state(state: object) -> str:
    s = text(state or "?")
    return f'<span class="state state-{s}">{s}</span>'


def _legend() -> str:
    steps, lo = [], 0.0
    for bound, fill, ink in svg.BURN_COLOURS:
        name = f"≥ {number(lo)}" if bound == float("inf") else f"< {number(bound)}"
        steps.append(f'<span style="background:{fill};color:{ink}">{text(name)}</span>')
        lo = bound
    fill, ink = svg.NO_DATA
    steps.append(f'<span style="background:{fill};color:{ink}">no data</span>')
    return '<p class="legend muted">burn rate: ' + "".join(steps) + "</p>"


def slo_card(i: int, row: Row, threshold: float | None) -> str:
    """One SLO on one model: state, explanation, facts, heat map and chart."""
    budget, cap, conc = (row.get(k) for k in ("error_budget_remaining", "capacity",
                                              "concurrency"))
    facts = []  # objective and SLI kind: not in a Prometheus report
    if row.get("objective") is not None:
        facts.append(f'objective <b>{number(row["objective"], pct=True)}</b>')
    if row.get("sli"):
        facts.append(f'{text(row["sli"])} SLI')
    facts += [f'budget left <b class="budget" data-value="{text(num(budget))}">'
             f'{number(budget, pct=True)}</b>'
             + (" (overspent)" if (num(budget) or 0.0) < 0 else ""),
             f'capacity <b class="capacity" data-value="{text(num(cap))}">{number(cap)}</b>'
             + (f' ({text(row["capacity_evidence"])})' if row.get("capacity_evidence") else ""),
             f'concurrency <b class="concurrency" data-value="{text(num(conc))}">'
             f'{number(conc)}</b>']
    if threshold is not None:
        facts.append(f"threshold {number(threshold)} s")
    if row.get("instance"):
        facts.append(f'instance {text(row["instance"])}')
    return (f'<article class="card slo" id="slo-{i}" data-slo="{text(row.get("slo"))}" '
            f'data-model="{text(row.get("model"))}" '
            f'data-version="{text(row.get("model_version"))}" '
            f'data-state="{text(row.get("state"))}">'
            f'<h3>{text(row.get("slo"))} · {text(model_label(row))} '
            f'{_state(row.get("state"))}</h3>'
            f'<p class="explanation">{text(row.get("explanation") or "-")}</p>'
            f'<p class="facts">{" · ".join(facts)}</p>'
            f'{svg.heatmap(row.get("burn_rates") or {})}'
            f'{svg.concurrency_chart(row, threshold)}</article>')


def _severity(row: Row) -> int:
    state = str(row.get("state"))
    return SEVERITY.index(state) if state in SEVERITY else len(SEVERITY)


def slos_section(slos: Sequence[Row], thresholds: dict[str, float],
                 max_cards: int = MAX_CARDS) -> str:
    """A summary table of every SLO and model, then a card for each of the
    ``max_cards`` worst (by :data:`~fleetwatch.slo.judge.states.SEVERITY`, then in order)."""
    carded = set(sorted(range(len(slos)), key=lambda i: _severity(slos[i]))[:max_cards])
    rows = [[f'<a href="#slo-{i}">{text(r.get("slo"))}</a>' if i in carded else
             text(r.get("slo")), text(model_label(r)),
             _state(r.get("state")), number(r.get("error_budget_remaining"), pct=True),
             number(r.get("capacity")), number(r.get("concurrency"))]
            for i, r in enumerate(slos)]
    cards = "".join(slo_card(i, r, thresholds.get(str(r.get("slo"))))
                    for i, r in enumerate(slos) if i in carded)
    more = len(slos) - len(carded)
    note = (f'<p class="muted">{more} more SLO rows (the best states) have no card here: '
            "see the table above or /slo</p>" if more else "")
    return ('<section id="slos"><h2>SLOs</h2>'
            + _table(["SLO", "model", "state", "budget left", "capacity", "concurrency"],
                     rows, "no SLO has data yet (or no SLO file: serve --slos)",
                     nowrap=(2, 3, 4, 5))
            + (_legend() + f'<div class="cards">{cards}</div>' + note if slos else "")
            + "</section>")


def _desired(r: Row) -> str:
    """`` · desired N replicas (driven by C)`` when the row has them (sidecar rows)."""
    n = r.get("desired_replicas")
    if n is None:
        return ""
    by = r.get("driver")
    return (f' · desired <b class="desired">{number(n)}</b> replica{"" if n == 1 else "s"}'
            + (f' (driven by <span class="driver">{text(by)}</span>)' if by else ""))


def autoscaling_section(models: Sequence[Row], history: dict[str, list[HistoryPoint]],
                        note: str = "") -> str:
    """Per model: the signal, its components as bars, state, capacity, history (or
    ``note`` when a model has none)."""
    cards = []
    for r in models:
        label = model_label(r)
        comps = r.get("components") or {}
        comp_rows = "".join(
            f'<tr><td>{text(k)}</td><td class="n">{number(v)}</td>'
            f"<td>{svg.bar(num(v))}</td></tr>" for k, v in sorted(comps.items()))
        cards.append(
            f'<article class="card signal" data-model="{text(r.get("model"))}" '
            f'data-version="{text(r.get("model_version"))}" '
            f'data-signal="{text(num(r.get("signal")))}">'
            f'<h3>{text(label)} {_state(r.get("state"))}</h3>'
            f'<p class="facts">signal <b>{number(r.get("signal"))}</b>'
            + _desired(r) + ' · capacity '
            f'{number(r.get("capacity"))} · concurrency {number(r.get("concurrency"))}'
            + (f' · instance {text(r["instance"])}' if r.get("instance") else "") + "</p>"
            + (f"<table><tbody>{comp_rows}</tbody></table>" if comp_rows else
               '<p class="muted">no components yet</p>')
            + (f'<p class="muted">{text(note)}</p>' if note and label not in history
               else svg.sparkline(history.get(label, []))) + "</article>")
    body = (f'<div class="cards">{"".join(cards)}</div>' if cards else
            '<p class="muted">no autoscaling signals yet</p>')
    return ('<section id="autoscaling"><h2>Autoscaling</h2><p class="muted">signal = the '
            "largest component (observed ÷ target; 1 = at target); desired replicas = "
            "ceil(Σ signal over replicas)</p>" + body + "</section>")


def render_page(page: PageInput) -> str:
    """The whole page (see the module docstring)."""
    links = "".join(f'<a href="{text(href)}">{text(name)}</a> ' for name, href in page["links"])
    refresh = (f'<meta http-equiv="refresh" content="{page["refresh_seconds"]:.0f}">'
               if page["refresh_seconds"] > 0 else "")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"{refresh}<title>{text(page['title'])}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>{text(page['title'])}</h1><span>{text(page['source'])}</span>"
        f'<span>engine updated <b id="updated" data-value="{text(page["updated"])}">'
        f"{text(_stamp(page['updated']))}</b></span>"
        f"<span>page at {text(_stamp(page['generated']))}</span><nav>{links}</nav></header>"
        "<main>" + targets_section(page["targets"]) + models_section(page["models"])
        + configuration_section(page["configuration"])
        + slos_section(page["slos"], page["thresholds"])
        + autoscaling_section(page["autoscaling"], page["history"], page["history_note"])
        + f'<section id="links"><h2>Endpoints</h2><p>{links or "-"}</p></section>'
        "</main></body></html>")
