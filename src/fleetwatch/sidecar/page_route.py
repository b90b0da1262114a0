"""The sidecar's status page, ``GET /`` (see :mod:`fleetwatch.page`).

The page is rendered from the documents ``/slo`` and ``/autoscaling`` serve (read
through their own handlers, so the page shows exactly what they answer), the targets'
health (``/readyz``'s detail) and every live target's models with their registry entry
and engine identity — at most once per scrape cycle and engine update (later loads get
the same bytes; a render that failed is retried), the facts read on the event loop and
the HTML written in a worker thread, so page loads do not hold up a scrape; while the page
is watched, each cycle's page is rendered right after the cycle, ready for the next load.
The autoscaling history is a :class:`~fleetwatch.page.history.SignalHistory` fed right after
the engine's update (a scraper subscriber that does work once per history step), never on
a page load.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.page.history import SignalHistory
from fleetwatch.page.model import ConfigRow, ModelView, PageInput, TargetView
from fleetwatch.page.render import render_page
from fleetwatch.sidecar.config_watch import ConfigWatch
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.slo_routes import Handler
from fleetwatch.sidecar.slo_worker import EngineWorker
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.status import autoscaling_document

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


class StatusPage:
    """The ``/`` route and its state: the history ring, the rendered page of the current
    scrape cycle and engine update (one render each, shared by every load), and when it
    was last loaded. While someone loads the page (within :attr:`WATCHED_SECONDS`), the
    page of each new cycle is rendered right after the cycle, so loads find it ready."""

    #: A page loaded this recently is re-rendered after each scrape cycle (seconds).
    WATCHED_SECONDS = 60.0

    def __init__(self, scraper: Scraper, source: SLOEngine | EngineWorker | None,
                 slo_handlers: Mapping[str, Handler] | None = None,
                 history: SignalHistory | None = None,
                 governance: ConfigWatch | None = None) -> None:
        self.scraper = scraper
        self.governance = governance
        self.worker = source if isinstance(source, EngineWorker) else None
        engine = self.engine = source.engine if isinstance(source, EngineWorker) else source
        self.handlers = dict(slo_handlers or {})
        self.history = history if history is not None else SignalHistory()
        self.thresholds = thresholds(engine)
        cfg = scraper.cfg
        self.source = (f"sidecar · {len(cfg.targets)} target(s) every "
                       f"{cfg.scrape.interval_seconds:g} s")
        self.links = [(n, h) for n, h in LINKS
                      if h in self.handlers or h in ("/metrics", "/readyz", "/healthz")]
        self._cache: dict[tuple[object, ...], asyncio.Future[str]] = {}
        self._last_request: web.Request | None = None
        self._last_load = -math.inf
        self._renders: set[asyncio.Task[str]] = set()  # background renders (kept alive)

    def _configuration(self) -> list[ConfigRow]:
        """The governance watch's last drifts (drifting fields only) and findings."""
        if self.governance is None:
            return []
        last = self.governance.last
        rows: list[ConfigRow] = [
            {"model": d.model, "kind": "drift", "what": d.field, "severity": "error",
             "detail": f"declared {d.declared!r}, running {d.running!r}"}
            for d in last.drifts if d.drifted]
        rows += [{"model": f.model, "kind": "lint", "what": f.check, "severity": f.severity,
                  "detail": f.message} for f in last.findings]
        return rows

    def _autoscaling_doc(self) -> Mapping[str, Any]:
        """The ``/autoscaling`` document of the last engine update (the worker's, read
        atomically; else built from the engine, which updates on this thread)."""
        if self.worker is not None:
            doc = self.worker.autoscaling_doc
            return doc if isinstance(doc, dict) else {}
        return autoscaling_document(self.engine) if self.engine is not None else {}

    def _updated(self) -> object:
        """The last engine update the documents show (None without an engine)."""
        if self.worker is not None:
            doc = self.worker.slo_doc
            return doc.get("updated") if isinstance(doc, dict) else None
        return self.engine.last_update if self.engine is not None else None

    def observe(self, _snap: Snapshot) -> None:
        """Scraper subscriber (after the engine's or its worker's): record the history
        when due; while the page is watched, render the new cycle's page in the
        background (after the worker's update)."""
        updated = self._updated()
        if isinstance(updated, (int, float)) and self.history.due(updated):
            doc = self._autoscaling_doc()
            self.history.record(updated, doc.get("models", []))
        request = self._last_request
        if request is not None and time.monotonic() - self._last_load < self.WATCHED_SECONDS:
            with contextlib.suppress(RuntimeError):  # no running loop: render on load
                task = asyncio.get_running_loop().create_task(self._prerender(request))
                self._renders.add(task)
                task.add_done_callback(self._renders.discard)

    async def _prerender(self, request: web.Request) -> str:
        if self.worker is not None:  # the snapshot was just submitted: wait its update
            await asyncio.to_thread(self.worker.wait, self.worker.updates + 1, 5.0)
        return await self._page(request)

    def _key(self) -> tuple[object, ...]:
        """What the page depends on: the scrape cycle and the engine update (not the
        request: a client cannot make it render again)."""
        snap = self.scraper.snapshot
        return (snap.timestamp if snap else None, self._updated())

    async def _input(self, request: web.Request) -> PageInput:
        slo_doc = await _document(self.handlers.get("/slo"), request)
        auto_doc = await _document(self.handlers.get("/autoscaling"), request)
        return {
            "title": "fleetwatch sidecar", "source": self.source,
            "generated": time.time(), "updated": slo_doc.get("updated"),
            "targets": targets_view(self.scraper), "models": models_view(self.scraper),
            "slos": slo_doc.get("slos", []), "autoscaling": auto_doc.get("models", []),
            "history": self.history.series(), "thresholds": self.thresholds,
            "links": self.links, "refresh_seconds": REFRESH_SECONDS, "history_note": "",
            "configuration": self._configuration()}

    async def _page(self, request: web.Request) -> str:
        """The page of the current cycle: rendered once (facts read here, on the event
        loop; HTML written in a worker thread), a failed render retried."""
        key = self._key()
        if key not in self._cache:
            page = await self._input(request)
            self._cache.clear()
            self._cache[key] = asyncio.ensure_future(asyncio.to_thread(render_page, page))
        try:
            return await asyncio.shield(self._cache[key])
        except Exception:
            self._cache.pop(key, None)
            raise

    async def index(self, request: web.Request) -> web.Response:
        """``GET /``: the status page (HTML)."""
        self._last_request, self._last_load = request, time.monotonic()
        html = await self._page(request)
        return web.Response(text=html, content_type="text/html", charset="utf-8")


def page_routes(scraper: Scraper, source: SLOEngine | EngineWorker | None,
                slo_handlers: Mapping[str, Handler] | None = None,
                history: SignalHistory | None = None,
                governance: ConfigWatch | None = None) -> dict[str, Handler]:
    """The ``/`` route (:class:`StatusPage`). With an SLO engine (``source``: the
    :class:`~fleetwatch.sidecar.slo_worker.EngineWorker` running it, or the engine when
    it updates on the event loop), its ``slo_handlers`` (``/slo``, ``/autoscaling``) give
    the SLO and autoscaling sections and ``history`` (a new :class:`SignalHistory` by
    default) is fed by a scraper subscriber, added here, that must come after the
    engine's (append order). ``governance``, the configuration watch
    (:class:`~fleetwatch.sidecar.config_watch.ConfigWatch`), gives the configuration
    section its last result."""
    page = StatusPage(scraper, source, slo_handlers, history, governance)
    scraper.subscribers.append(page.observe)
    return {"/": page.index}
