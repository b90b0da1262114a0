"""The sidecar's status page, ``GET /`` (see :mod:`fleetwatch.page`).

The page is rendered from the documents ``/slo`` and ``/autoscaling`` serve (read
through their own handlers, so the page shows exactly what they answer), the targets'
health (``/readyz``'s detail) and every live target's models with their registry entry
and engine identity — at most once per scrape cycle and engine update (later loads get
the same bytes; a render that failed is retried), the facts read on the event loop and
the HTML written in a worker thread, so page loads do not hold up a scrape. The
autoscaling history is a :class:`~fleetwatch.page.history.SignalHistory` fed right after
the engine's update (a scraper subscriber that does work once per history step), never on
a page load.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.page.history import SignalHistory
from fleetwatch.page.model import ModelView, PageInput, TargetView
from fleetwatch.page.render import render_page
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.slo_routes import Handler
from fleetwatch.slo.engine import SLOEngine

#: Endpoints the page links to (those the sidecar serves).
LINKS = (("/metrics", "/metrics"), ("/slo", "/slo"), ("/autoscaling", "/autoscaling"),
         ("/readyz", "/readyz"), ("/healthz", "/healthz"))
#: The sidecar's page reloads itself this often (seconds; a meta refresh, no script).
REFRESH_SECONDS = 15.0


def targets_view(scraper: Scraper) -> list[TargetView]:
    """Every target's health, as ``/readyz`` details it."""
    from fleetwatch.sidecar.server import readiness  # server imports this module

    _, detail = readiness(scraper)
    return [{"name": name, "kind": t["kind"] or scraper.states[name].target.kind,
             "up": t["up"], "ready": t["ready"],
             "required": t["required"], "error": t["error"],
             "models_not_ready": t["models_not_ready"],
             "models_sleeping": t["models_sleeping"]}
            for name, t in detail["targets"].items()]


def models_view(scraper: Scraper) -> list[ModelView]:
    """Every model a live target exposed in its last scrape, with its registry entry
    (empty fields: unregistered) and what its server reports (engine version,
    quantization), sorted."""
    out: list[ModelView] = []
    for name, st in scraper.states.items():
        if not st.up or st.normalized is None:
            continue
        ident = st.identity or {}
        for model, version, backend, runtime in sorted(st.normalized.models):
            e = scraper.registry.lookup(model, version)
            out.append({"model": model, "model_version": version, "backend": backend,
                        "runtime": runtime, "target": name,
                        "team": e.team if e else "", "owner": e.owner if e else "",
                        "oncall": e.oncall if e else "",
                        "latency_tier": e.latency_tier if e else "",
                        "engine_version": ident.get("engine_version", ""),
                        "quantization": ident.get("quantization")
                        or (e.quantization if e and e.quantization else "")})
    return sorted(out, key=lambda m: (m["model"], m["model_version"], m["target"]))


def thresholds(engine: SLOEngine | None) -> dict[str, float]:
    """SLO name → its latency threshold in seconds (latency and timeslice SLIs)."""
    out: dict[str, float] = {}
    for slo in engine.spec.slos if engine else ():
        sli = slo.sli.latency or slo.sli.timeslice
        if sli is not None:
            out[slo.name] = sli.threshold_seconds
    return out


async def _document(handler: Handler | None, request: web.Request) -> dict[str, Any]:
    """The JSON document a route answers (``{}`` without the route)."""
    if handler is None:
        return {}
    resp = await handler(request)
    body = resp.body if isinstance(resp, web.Response) else None
    return json.loads(body) if isinstance(body, (bytes, bytearray)) else {}


def page_routes(scraper: Scraper, engine: SLOEngine | None,
                slo_handlers: Mapping[str, Handler] | None = None,
                history: SignalHistory | None = None) -> dict[str, Handler]:
    """The ``/`` route. With an ``engine``, its ``slo_handlers`` (``/slo``,
    ``/autoscaling``) give the SLO and autoscaling sections and ``history`` (a new
    :class:`SignalHistory` by default) is fed from a scraper subscriber that must run
    after the engine's own (append order)."""
    handlers = dict(slo_handlers or {})
    ring = history if history is not None else SignalHistory()
    if engine is not None:
        def observe(_snap: Snapshot) -> None:
            if ring.due(engine.last_update):
                ring.record(engine.last_update, engine.autoscaling())

        scraper.subscribers.append(observe)
    limits = thresholds(engine)
    links = [(n, h) for n, h in LINKS if h in handlers or h in ("/metrics", "/readyz",
                                                               "/healthz")]
    cache: dict[tuple[object, ...], asyncio.Future[str]] = {}

    async def page_input(request: web.Request) -> PageInput:
        slo_doc = await _document(handlers.get("/slo"), request)
        auto_doc = await _document(handlers.get("/autoscaling"), request)
        return {
            "title": "fleetwatch sidecar", "source": f"sidecar · {request.host}",
            "generated": time.time(), "updated": slo_doc.get("updated"),
            "targets": targets_view(scraper), "models": models_view(scraper),
            "slos": slo_doc.get("slos", []), "autoscaling": auto_doc.get("models", []),
            "history": ring.series(), "thresholds": limits, "links": links,
            "refresh_seconds": REFRESH_SECONDS, "history_note": ""}

    async def index(request: web.Request) -> web.Response:
        snap = scraper.snapshot
        key = (snap.timestamp if snap else None, engine.last_update if engine else None,
               request.host)
        if key not in cache:  # the facts are read here, the HTML is written in a thread
            page = await page_input(request)
            cache.clear()
            cache[key] = asyncio.ensure_future(asyncio.to_thread(render_page, page))
        try:
            html = await asyncio.shield(cache[key])
        except Exception:
            cache.pop(key, None)
            raise
        return web.Response(text=html, content_type="text/html", charset="utf-8")

    return {"/": index}
