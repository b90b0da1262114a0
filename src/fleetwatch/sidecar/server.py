"""The sidecar's HTTP server: ``/metrics``, ``/healthz``, ``/readyz`` (+ the SLO engine's
``/slo`` and ``/autoscaling`` when SLOs are configured; the status page ``/``).

* ``/metrics`` — the latest normalized exposition, fleetwatch's own metrics, the SLO
  engine's and the families passed through, merged without duplicates by
  :class:`~fleetwatch.sidecar.metrics.MetricsAssembler` (text format 0.0.4,
  ``Content-Type: text/plain; version=0.0.4; charset=utf-8``), gzip-coded when the
  client's ``Accept-Encoding`` prefers it (:mod:`.encoding`: q-values, ``identity``,
  ``*``), from gzip members compressed once per cycle; ``extra_routes`` lets the SLO
  engine add its own.
* ``/healthz`` — liveness: 200 while the process serves (never depends on upstreams).
* ``/readyz`` — readiness: 200 only when every *required* target answered its last scrape
  and all its models report ready (Triton ``/v2/models/<m>/ready``, vLLM ``/health``);
  503 otherwise, with a JSON body saying which target or model is not ready. LLMs take
  minutes to load, hence readiness apart from liveness. An engine in sleep mode (vLLM
  ``engine_sleep_state``) answers ``/health`` but serves nothing: its models are not ready
  (listed under ``models_sleeping`` too). A model whose registry warm-up is required
  (``warmup.gate: required``) is not ready until it ran on this server instance
  (``models_not_warm``; :mod:`.warmup`).

Connections are bounded (:mod:`.guard`: ``listen.max_connections``, a header timeout,
rate-limited accept errors). **SIGHUP is ignored** with a log line (``SIGHUP ignored: …
restart to apply a changed configuration``): the configuration is read once at start, so
an orchestrator's reload signal never kills the process; SIGINT stops it, SIGTERM after
``shutdown.drain_seconds`` (:mod:`.shutdown`). With SLOs, the engine's state is recovered
before the server listens and saved to ``state_dir`` (:mod:`.recover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from fleetwatch.exporters.assemble import Part
from fleetwatch.governance.lint import default_not_ready_allowance
from fleetwatch.labels.registry import Registry
from fleetwatch.otlp.start import start_otlp
from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.sidecar.config_watch import attach as attach_config_watch
from fleetwatch.sidecar.encoding import wants_gzip
from fleetwatch.sidecar.gpu_facts import GPUAccounting
from fleetwatch.sidecar.gpu_facts import attach as attach_gpu_accounting
from fleetwatch.sidecar.guard import ConnectionGuard, GuardedSite, install_exception_handler
from fleetwatch.sidecar.metrics import MetricsAssembler
from fleetwatch.sidecar.page_route import page_routes
from fleetwatch.sidecar.recover import SnapshotWriter, recover
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.shutdown import Drain
from fleetwatch.sidecar.slo_routes import Handler, slo_routes
from fleetwatch.sidecar.slo_worker import EngineWorker
from fleetwatch.sidecar.strictjson import json_response
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import SLOFile

log = logging.getLogger("fleetwatch.server")

__all__ = ["METRICS_CONTENT_TYPE", "Handler", "ListenError", "make_app",
           "readiness", "run_sidecar", "slo_routes"]

#: What /metrics serves: the text format 0.0.4 (prometheus_client's CONTENT_TYPE_LATEST
#: may name another version than the one written).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _export_part(scraper: Scraper, gpu: GPUAccounting) -> Part:
    """What the OTLP metrics export reads: the normalized part plus the shared-GPU
    accounting's ``modelserver_*`` families (placement, footprints)."""
    part, extra = scraper.normalized_part, gpu.schema_families()
    if not extra:
        return part
    return Part(part.origin, [*part.families, *extra], check_names=False, check_series=False)


class ListenError(RuntimeError):
    """The HTTP socket cannot listen (port in use, address not resolvable or not local)."""


def readiness(scraper: Scraper) -> tuple[bool, dict[str, Any]]:
    """``(ready, detail)`` for /readyz; detail lists every target's state."""
    targets: dict[str, Any] = {}
    detail: dict[str, Any] = {"targets": targets}
    ready = True
    for name, st in scraper.states.items():
        not_ready = sorted(m for m, ok in st.models_ready.items() if not ok)
        # warm-up gating (sidecar.warmup): a required warm-up that has not run
        cold = scraper.warmup.not_warm(name, sorted(st.models_ready)) if scraper.warmup else []
        t_ready = st.up and not not_ready and not cold
        targets[name] = {
            "required": st.target.required, "up": st.up, "kind": st.kind,
            "error": st.last_error, "models_not_ready": not_ready, "ready": t_ready,
            "models_sleeping": sorted(st.models_sleeping),
        }
        if scraper.warmup is not None:
            targets[name]["models_not_warm"] = cold
        if st.target.required and not t_ready:
            ready = False
    detail["ready"] = ready
    return ready, detail


def make_app(scraper: Scraper,
             extra_routes: dict[str, Handler] | None = None,
             extra_metrics: Callable[[], bytes] | None = None,
             guard: ConnectionGuard | None = None,
             normalized: Callable[[Part], Part] | None = None,
             drain: Drain | None = None) -> web.Application:
    """Build the aiohttp application around a running :class:`Scraper`;
    ``extra_metrics`` returns the SLO engine's exposition (bytes) for /metrics; ``guard``
    (served through :class:`~.guard.GuardedSite`) bounds the connections; ``normalized``
    rewrites the normalized families (the trace receiver's real Triton buckets);
    while ``drain`` drains (:mod:`.shutdown`) /readyz answers 503."""
    assembler = MetricsAssembler(scraper, extra_metrics,
                                 guard.closed if guard is not None else None, normalized)
    assembling = asyncio.Lock()  # one assembly at a time (its SLO part in a thread)

    async def metrics(request: web.Request) -> web.Response:
        gz = wants_gzip(request.headers.get("Accept-Encoding", ""))
        headers = {"Content-Type": METRICS_CONTENT_TYPE, "Vary": "Accept-Encoding"}
        if gz:  # cached gzip members (sidecar.metrics), never compressed per request
            headers["Content-Encoding"] = "gzip"
        async with assembling:
            body = await assembler.encode_async(gz)
        return web.Response(body=body, headers=headers)

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_request: web.Request) -> web.Response:
        ok, detail = readiness(scraper)
        if drain is not None and drain.draining:
            ok = detail["ready"] = False
            detail["shutting_down"] = True
        return json_response(detail, status=200 if ok else 503)

    app = web.Application(middlewares=[guard.middleware] if guard is not None else [])
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    for path, handler in (extra_routes or {}).items():
        app.router.add_get(path, handler)
    return app


async def run_sidecar(cfg: SidecarConfig, registry: Registry | None = None,
                      stop: asyncio.Event | None = None,
                      on_ready: Callable[[int], None] | None = None,
                      slos: SLOFile | None = None) -> None:
    """Serve until ``stop`` is set or SIGINT/SIGTERM arrives.

    ``on_ready(port)`` is called once the HTTP socket listens (port 0 picks a free one).
    With ``slos``, the SLO engine runs on every snapshot and its metrics and endpoints
    are served too.
    """
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    drain = Drain(stop, cfg.shutdown.drain_seconds)  # SIGTERM drains (shutdown)
    drain.install(loop)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, AttributeError):
        loop.add_signal_handler(signal.SIGHUP, log.warning, "SIGHUP ignored: fleetwatch "
                                "reads its configuration once at start; restart to apply "
                                "a changed configuration")
    install_exception_handler(loop)
    guard = ConnectionGuard(_connection_cap(cfg.listen.max_connections,
                                            _fd_reserve(cfg)),
                            cfg.listen.header_timeout_seconds)
    async with Scraper(cfg, registry) as scraper:
        routes, extra = None, None
        worker: EngineWorker | None = None
        writer = SnapshotWriter(cfg.state_dir, cfg.slo.snapshot_interval_seconds) \
            if cfg.state_dir is not None and slos is not None else None
        if slos is not None:  # the engine updates in its own thread (slo_worker)
            engine = SLOEngine(slos, registry, placement=cfg.declared_placement())
            await recover(cfg, engine, time.time())  # sidecar.recover: one log line
            worker = EngineWorker(engine, scraper.cold_starts.by_model,
                                  writer.maybe_save if writer is not None else None)
            scraper.subscribers.append(worker.submit)
            routes, extra = slo_routes(engine, worker)
        gpu = attach_gpu_accounting(cfg, registry, scraper)  # placement, quotas (gpu_facts)
        if worker is not None:  # attribution sees discovered placement too, not only declared
            gpu.placement_listeners.append(worker.engine.attribution.set_placement)
        extra = gpu.chain(extra)
        watch = attach_config_watch(cfg, registry, scraper, default_not_ready_allowance)
        extra = watch.chain(extra)  # declared vs running, lint (config_watch)
        routes = {**(routes or {}), **page_routes(scraper, worker, routes, governance=watch)}
        # the OTLP receiver (trace events reach the engine through its worker), export
        receiver, extra, otlp_tasks = start_otlp(cfg.traces, cfg.metrics_export,
                                                 lambda: _export_part(scraper, gpu), worker,
                                                 extra, stop, ConnectionGuard,
                                                 cfg.scrape.max_label_value_length)
        app = make_app(scraper, routes, extra, guard,
                       receiver.normalized if receiver is not None else None, drain)
        runner = web.AppRunner(app, access_log=None, lingering_time=2.0)
        await runner.setup()
        site = GuardedSite(runner, cfg.listen.address, cfg.listen.port, guard)
        try:
            await site.start()
        except OSError as exc:  # port in use, unresolvable name (socket.gaierror), …
            await runner.cleanup()
            if isinstance(exc, socket.gaierror) or not exc.errno:
                detail = exc.strerror or str(exc)
            else:  # asyncio's message repeats the address: the errno's text is enough
                detail = os.strerror(exc.errno)
            raise ListenError(f"cannot listen on {cfg.listen.address}:{cfg.listen.port}: "
                              f"{detail}") from None
        port = runner.addresses[0][1] if runner.addresses else cfg.listen.port
        log.info("serving on http://%s:%d/metrics (%d targets, every %.1f s)",
                 cfg.listen.address, port, len(cfg.targets), cfg.scrape.interval_seconds)
        if on_ready:
            on_ready(port)
        tasks = [asyncio.create_task(t.run(stop)) for t in (gpu, watch)]  # slow periods
        try:
            await scraper.run(stop)
        finally:
            await runner.cleanup()
            if otlp_tasks:
                stop.set()
                await asyncio.gather(*otlp_tasks)
            if worker is not None:
                worker.stop()
                if writer is not None and writer.save(worker.engine) is not None:
                    # the engine's thread has ended: the state is consistent
                    log.info("SLO state saved to %s", writer.state_dir)
            await _cancel(tasks)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the background tasks and wait until they ended."""
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


#: File descriptors kept beyond the connection cap besides those open at start and one
#: per concurrent readiness probe: the upstream scrapes (two per target, connection
#: pools), logs and files (64), and three accept bursts: asyncio accepts up to the
#: listen backlog of connections per loop turn, makes an accepted connection's protocol
#: (where the guard refuses it) a turn later and closes a refused one's socket a turn
#: after that, so under a flood three bursts are open at once (a reserve of one burst
#: runs out of descriptors: EMFILE).
FD_RESERVE = 64 + 3 * GuardedSite.BACKLOG


def _fd_reserve(cfg: SidecarConfig) -> int:
    """:data:`FD_RESERVE`, plus the descriptors open now (libraries, the log, thread
    wake-up pipes), the readiness probes (``scrape.probe_concurrency``) and two per
    target (its scrape and its API: Triton's config and statistics, vLLM's version), and
    the OTLP receiver's connection cap (``traces.max_connections``)."""
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux
        open_now = 32
    otlp = cfg.traces.max_connections if cfg.traces is not None else 0  # its own cap
    return (FD_RESERVE + open_now + cfg.scrape.probe_concurrency + 2 * len(cfg.targets)
            + otlp)


def _connection_cap(wanted: int, reserve: int = FD_RESERVE) -> int:
    """``listen.max_connections``, raising the soft file-descriptor limit to fit it and
    ``reserve`` descriptors besides (up to the hard limit), else lowered to what the
    limit leaves after ``reserve`` (one log line)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + reserve
    if soft != resource.RLIM_INFINITY and soft < need:
        new = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
    if soft != resource.RLIM_INFINITY and soft < need:
        cap = max(1, soft - reserve)
        log.warning("listen.max_connections %d does not fit the file-descriptor limit %d: "
                    "serving at most %d connections", wanted, soft, cap)
        return cap
    return wanted
