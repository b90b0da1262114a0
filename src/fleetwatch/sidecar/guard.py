"""Bounds of the sidecar's own HTTP server: connections, header time, accept errors.

aiohttp bounds request lines and headers by size but not by time, and accepts every
connection it is offered. :class:`ConnectionGuard` wraps each connection's protocol
(:class:`GuardedSite` listens with it):

* at most ``max_connections`` are open at once; a further one is closed at accept
  (``fleetwatch_http_connections_closed_total{reason="max_connections"}``), so file
  descriptors are never exhausted by clients and the upstream scrapes keep theirs;
* a client has ``header_timeout`` seconds to send a request's headers — from connect, or
  from its first byte after an answer on a kept-alive connection — else the connection is
  closed (``reason="header_timeout"``): a slowloris client holds nothing for long. An idle
  kept-alive connection is closed after :data:`IDLE_SECONDS`. Request bodies are never
  read (every route is a GET); aiohttp's ``lingering_time`` bounds draining one.

:func:`install_exception_handler` makes the event loop's own errors (``accept()`` failing
with "Too many open files", a connection reset mid-answer) one rate-limited log line per
kind and :data:`LOG_EVERY_SECONDS` (``… (N more like it in the last 10 s)``) instead of a
traceback each.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import ssl
import time
from collections import Counter
from typing import Any

from aiohttp import web

log = logging.getLogger("fleetwatch.server")

#: Seconds an idle kept-alive connection stays open.
IDLE_SECONDS = 75.0
#: Seconds between two log lines of one kind of event-loop error.
LOG_EVERY_SECONDS = 10.0


class ConnectionGuard:
    """Counts open connections and closes those past a bound (see module docstring);
    ``closed`` counts closures by reason (read by the self-metrics collector)."""

    def __init__(self, max_connections: int, header_timeout: float) -> None:
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.open = 0
        self.closed: Counter[str] = Counter()
        self._by_transport: dict[asyncio.BaseTransport, _Guarded] = {}
        self._last_refusal_log = 0.0

    def site(self, runner: web.BaseRunner, host: str, port: int,
             ssl_context: ssl.SSLContext | None = None) -> GuardedSite:
        """A site listening on ``host:port`` through this guard (TLS with
        ``ssl_context``)."""
        return GuardedSite(runner, host, port, self, ssl_context)

    def wrap(self, inner: asyncio.Protocol) -> asyncio.Protocol:
        """The protocol the event loop sees for one connection."""
        return _Guarded(self, inner)

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Any) -> web.StreamResponse:
        """Marks a request as started (its headers arrived) and, once answered, the
        connection as idle."""
        conn = self._by_transport.get(request.transport) if request.transport else None
        if conn is not None:
            conn.busy()
        try:
            resp: web.StreamResponse = await handler(request)
            return resp
        finally:
            if conn is not None:
                conn.idle()

    def _refused(self) -> None:
        self.closed["max_connections"] += 1
        now = time.monotonic()
        if now - self._last_refusal_log >= LOG_EVERY_SECONDS:
            self._last_refusal_log = now
            log.warning("HTTP: %d connections open (listen.max_connections): closing new "
                        "ones at accept (%d so far)", self.open, self.closed["max_connections"])


class _Guarded(asyncio.Protocol):
    """One connection: the aiohttp protocol inside, a deadline around it."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner: asyncio.Protocol | None = inner
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.waiting_headers = True  # False while a request is handled or idle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        g = self.guard
        g.open += 1
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if g.open > g.max_connections:
            self.inner = None
            g._refused()
            transport.abort()
            return
        g._by_transport[transport] = self
        assert self.inner is not None
        self.inner.connection_made(transport)
        self._arm(g.header_timeout, "header_timeout")

    def _arm(self, seconds: float, reason: str) -> None:
        if self.timer is not None:
            self.timer.cancel()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(seconds, self._expire, reason)

    def _expire(self, reason: str) -> None:
        self.timer = None
        if self.transport is not None and not self.transport.is_closing():
            if reason == "header_timeout":
                self.guard.closed[reason] += 1
            self.transport.close()

    def busy(self) -> None:
        self.waiting_headers = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def idle(self) -> None:
        self.waiting_headers = False
        self._arm(IDLE_SECONDS, "idle")

    def data_received(self, data: bytes) -> None:
        if not self.waiting_headers and self.timer is not None:
            # the first bytes of the next request on a kept-alive connection
            self.waiting_headers = True
            self._arm(self.guard.header_timeout, "header_timeout")
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        g = self.guard
        g.open -= 1
        if self.timer is not None:
            self.timer.cancel()
        if self.transport is not None:
            g._by_transport.pop(self.transport, None)
        if self.inner is not None:
            self.inner.connection_lost(exc)


class GuardedSite(web.TCPSite):
    """A :class:`aiohttp.web.TCPSite` whose connections go through a
    :class:`ConnectionGuard`."""

    #: Listen backlog, which is also how many connections asyncio accepts per loop turn
    #: (each burst is file descriptors held until the guard refuses them: kept small).
    BACKLOG = 64

    def __init__(self, runner: web.BaseRunner, host: str, port: int,
                 guard: ConnectionGuard, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        guard = self.guard
        self._server = await loop.create_server(
            lambda: guard.wrap(server()), self._host, self._port,
            ssl=self._ssl_context, reuse_address=self._reuse_address, backlog=self.BACKLOG)


def install_exception_handler(loop: asyncio.AbstractEventLoop) -> None:
    """Rate-limit the event loop's error reports: one line per kind of error and
    :data:`LOG_EVERY_SECONDS`, no traceback for resource exhaustion (EMFILE/ENFILE/
    ENOBUFS/ENOMEM: asyncio pauses accepting and retries)."""
    last: dict[str, float] = {}
    suppressed: Counter[str] = Counter()

    def handler(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        kind = f"{context.get('message', '')}|{type(exc).__name__}"
        now = time.monotonic()
        if now - last.get(kind, -LOG_EVERY_SECONDS) < LOG_EVERY_SECONDS:
            suppressed[kind] += 1
            return
        last[kind] = now
        more = suppressed.pop(kind, 0)
        tail = f" ({more} more like it in the last {LOG_EVERY_SECONDS:g} s)" if more else ""
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE,
                                                      errno.ENOBUFS, errno.ENOMEM):
            log.error("HTTP: %s: %s: out of resources, accepting paused and retried%s",
                      context.get("message", "event loop error"), exc, tail)
            return
        log.error("event loop: %s: %s%s", context.get("message", "error"),
                  f"{type(exc).__name__}: {exc}" if exc else "", tail)

    loop.set_exception_handler(handler)
