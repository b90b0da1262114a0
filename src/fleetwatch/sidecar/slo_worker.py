"""The SLO engine off the event loop: ``/metrics`` never waits for an update.

The scraper hands each snapshot to :meth:`EngineWorker.submit`, which only stores it (the
latest wins: a backlog is never built). A worker thread runs
:meth:`~fleetwatch.slo.engine.SLOEngine.update` (with the cold starts the scraper
measured) — and :meth:`~fleetwatch.slo.engine.SLOEngine.add_events` for the judged trace
events :meth:`EngineWorker.add_events` queued — and then renders, in the same thread,
everything the HTTP handlers serve: the engine's exposition (``fleetwatch_slo_*``,
``fleetwatch_autoscaling_*``, ``fleetwatch_rollout_verdict``) and the ``/slo`` and
``/autoscaling`` documents (strict JSON data). Handlers read the last rendered objects —
one attribute read each, atomic under the GIL — so an update in progress costs them
nothing; what they serve is at most one update old.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from prometheus_client import generate_latest

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.rollout.export import RolloutCollector
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.export import slo_registry
from fleetwatch.slo.outputs.status import autoscaling_document, slo_document, strict_json
from fleetwatch.slo.state import TraceEvent

log = logging.getLogger(__name__)

#: Judged trace events that may wait for the engine thread.
MAX_EVENTS = 100_000


class EngineWorker:
    """Runs one engine in a daemon thread; see the module doc. ``cold_starts`` returns
    model name → last cold start (seconds) before each update; ``after_update`` is
    called with the engine after each (in the thread: the engine is consistent)."""

    def __init__(self, engine: SLOEngine,
                 cold_starts: Callable[[], dict[str, float]] | None = None,
                 after_update: Callable[[SLOEngine], None] | None = None) -> None:
        self.engine = engine
        self._cold_starts = cold_starts
        #: called in the thread after each update (the state snapshot: sidecar.recover)
        self._after_update = after_update
        self._registry = slo_registry(engine)
        self._registry.register(RolloutCollector(engine))  # fleetwatch_rollout_verdict
        self._cv = threading.Condition()
        self._pending: Snapshot | None = None
        #: judged trace events waiting for the thread (SLOEngine.add_events), bounded
        self._events: list[TraceEvent] = []
        self.events_dropped = 0
        self._stopping = False
        self.updates = 0
        self._render()
        self._thread = threading.Thread(target=self._run, name="slo-engine", daemon=True)
        self._thread.start()

    def submit(self, snap: Snapshot) -> None:
        """Queue a snapshot for the next update (replacing one not yet taken)."""
        with self._cv:
            self._pending = snap
            self._cv.notify()

    def add_events(self, events: list[TraceEvent]) -> None:
        """Queue judged trace events for the thread (at most :data:`MAX_EVENTS` waiting;
        more are dropped and counted in ``events_dropped``)."""
        if not events:
            return
        with self._cv:
            room = MAX_EVENTS - len(self._events)
            self._events.extend(events[:max(room, 0)])
            self.events_dropped += max(len(events) - max(room, 0), 0)
            self._cv.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Finish the update in progress and end the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._thread.join(timeout)

    def wait(self, updates: int, timeout: float = 5.0) -> bool:
        """Block until at least ``updates`` updates were rendered (tests)."""
        with self._cv:
            return self._cv.wait_for(lambda: self.updates >= updates, timeout)

    def _render(self) -> None:
        self.metrics_body: bytes = generate_latest(self._registry)
        self.slo_doc: object = strict_json(slo_document(self.engine))
        self.autoscaling_doc: object = strict_json(autoscaling_document(self.engine))

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending is not None or bool(self._events)
                                  or self._stopping)
                if self._stopping:
                    return
                snap, self._pending = self._pending, None
                events, self._events = self._events, []
            try:
                if events:
                    self.engine.add_events(events)
                if snap is not None:
                    if self._cold_starts is not None:
                        self.engine.cold_starts = self._cold_starts()
                    self.engine.update(snap)
                self._render()
                if self._after_update is not None:
                    self._after_update(self.engine)
            except Exception:  # a bug must not stop the engine: log it, take the next
                log.exception("SLO engine update failed")
            with self._cv:
                self.updates += 1
                self._cv.notify_all()
