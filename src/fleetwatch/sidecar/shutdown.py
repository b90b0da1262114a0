"""Graceful shutdown: SIGTERM drains, SIGINT stops.

Kubernetes sends SIGTERM when it stops a pod, and takes the pod out of its Service's
endpoints at the same time; Prometheus scrapes the pod's targets until they are gone. On
SIGTERM the sidecar therefore keeps serving — ``/readyz`` answers 503 at once (nothing new
is routed to the pod), ``/metrics``, ``/slo`` and the scrapes go on — for
``shutdown.drain_seconds``, so that a last scrape reads the final counters; then it stops
(the caller writes the state snapshot and returns: exit 0). A second SIGTERM, or SIGINT,
stops at once. ``terminationGracePeriodSeconds`` of the pod must exceed the drain (the
generated manifests set it: :mod:`fleetwatch.manifests`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

log = logging.getLogger("fleetwatch.server")


class Drain:
    """The shutdown state: ``draining`` (set on SIGTERM: ``/readyz`` answers 503) and
    ``stop`` (set when the drain of ``drain_seconds`` has passed, or at once)."""

    def __init__(self, stop: asyncio.Event, drain_seconds: float) -> None:
        self.stop, self.drain_seconds = stop, drain_seconds
        self.draining = False

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Handle SIGTERM (:meth:`terminate`) and SIGINT (stop at once) on ``loop``."""
        for sig, handler in ((signal.SIGINT, self.stop.set), (signal.SIGTERM, self.terminate)):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, handler)

    def terminate(self) -> None:
        """Start the drain (the first time with a drain configured), else stop now."""
        if self.draining or self.drain_seconds <= 0:
            self.stop.set()
            return
        self.draining = True
        log.info("SIGTERM: /readyz answers 503; serving /metrics %g s more "
                 "(shutdown.drain_seconds), then saving the state and exiting",
                 self.drain_seconds)
        asyncio.get_running_loop().call_later(self.drain_seconds, self.stop.set)
