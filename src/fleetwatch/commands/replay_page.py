"""``fleetwatch slo replay --html OUT``: the status page of a replayed capture sequence.

The same page the sidecar serves at ``/`` (:func:`fleetwatch.page.render.render_page`), made
from the engine that replayed the captures: the final ``/slo`` and ``/autoscaling``
documents, the autoscaling history recorded after each capture (one point per capture at
most every :data:`HISTORY_STEP_SECONDS`), the models the engine saw with their registry
entries, and the captures as the one "target". One self-contained file (inline CSS and
SVG, no script), for an incident or a rollout review. Raises ``OSError`` when ``out``
cannot be written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetwatch.labels.registry import Registry
from fleetwatch.page.history import SignalHistory
from fleetwatch.page.model import ModelView, PageInput, TargetView
from fleetwatch.page.render import render_page
from fleetwatch.sidecar.page_route import thresholds
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.status import autoscaling_document, slo_document, strict_json

#: Seconds between two history points (the sidecar's page records every 10 s as well).
HISTORY_STEP_SECONDS = 10.0


def new_history(captures: int) -> SignalHistory:
    """A history ring large enough for one point per capture."""
    return SignalHistory(maxlen=max(captures, 1), step_seconds=HISTORY_STEP_SECONDS)


def _doc(document: dict[str, object]) -> dict[str, Any]:
    """A ``/slo`` or ``/autoscaling`` document as served: strict JSON (no NaN)."""
    strict = strict_json(document)
    assert isinstance(strict, dict)
    return strict


def record(history: SignalHistory, engine: SLOEngine) -> None:
    """Record the engine's current ``/autoscaling`` rows (after a capture was fed)."""
    doc = _doc(autoscaling_document(engine))
    history.record(doc.get("updated"), doc.get("models", []))


def _models(rows: Sequence[dict[str, object]], registry: Registry | None) -> list[ModelView]:
    out: dict[tuple[str, str, str], ModelView] = {}
    for row in rows:
        model, version = str(row.get("model", "")), str(row.get("model_version", ""))
        backend = str(row.get("backend", ""))
        e = registry.lookup(model, version) if registry else None
        out[(model, version, backend)] = {
            "model": model, "model_version": version, "backend": backend, "runtime": "",
            "target": "replay", "team": e.team if e else "", "owner": e.owner if e else "",
            "oncall": e.oncall if e else "", "latency_tier": e.latency_tier if e else "",
            "engine_version": "", "quantization": (e.quantization or "") if e else ""}
    return [out[k] for k in sorted(out)]


def write_replay_page(out: str | Path, engine: SLOEngine, history: SignalHistory,
                      registry: Registry | None, captures: Sequence[Path]) -> Path:
    """Render the page of a finished replay and write it to ``out`` (UTF-8)."""
    slo_doc = _doc(slo_document(engine))
    auto_doc = _doc(autoscaling_document(engine))
    first, last = (captures[0].name, captures[-1].name) if captures else ("", "")
    target: TargetView = {"name": "replay", "kind": f"{len(captures)} captures", "up": True,
                          "ready": True, "required": None, "error": None,
                          "models_not_ready": [], "models_sleeping": []}
    page: PageInput = {
        "title": "fleetwatch replay", "source": f"replay of {first} … {last}",
        "generated": time.time(), "updated": slo_doc.get("updated"),
        "targets": [target], "models": _models(auto_doc.get("models", []), registry),
        "slos": slo_doc.get("slos", []), "autoscaling": auto_doc.get("models", []),
        "history": history.series(), "thresholds": thresholds(engine),
        "links": [], "refresh_seconds": 0.0, "history_note": "",
        "configuration": []}
    path = Path(out)
    path.write_text(render_page(page), encoding="utf-8")
    return path
