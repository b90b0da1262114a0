"""The HTTP side of a source's probes: model readiness, runtime discovery, engine identity.

A :class:`~fleetwatch.exporters.source.Source` declares *what* to ask
(:class:`~fleetwatch.exporters.source.ModelReadyProbe`,
:class:`~fleetwatch.exporters.source.HealthProbe`,
:class:`~fleetwatch.exporters.source.RuntimeProbe`,
:class:`~fleetwatch.exporters.source.IdentityProbe`); :class:`Prober` asks it with the
scraper's session (bounded by the scrape timeout) and never raises on a bad answer: no
answer is "not ready" or "ask again next scrape".
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import aiohttp

from fleetwatch.exporters.source import (
    HealthProbe,
    IdentityProbe,
    ModelReadyProbe,
    RuntimeProbe,
    Source,
)
from fleetwatch.sidecar.config import Target

T = TypeVar("T")


class Prober:
    """Runs probes with the session ``session()`` returns (the scraper's, once open)."""

    def __init__(self, session: Callable[[], aiohttp.ClientSession | None],
                 concurrency: int = 16) -> None:
        self._session = session
        self.concurrency = concurrency

    async def _bounded(self, calls: Sequence[Awaitable[T]]) -> list[T]:
        """Await ``calls`` concurrently, at most :attr:`concurrency` at a time, in order."""
        sem = asyncio.Semaphore(self.concurrency)

        async def one(call: Awaitable[T]) -> T:
            async with sem:
                return await call
        return list(await asyncio.gather(*(one(c) for c in calls)))

    def learns_runtimes(self, source: Source | None, target: Target) -> bool:
        """Whether the target's models' runtimes can be asked (a probe and an api_url)."""
        return source is not None and source.runtime_probe is not None \
            and target.api_url is not None

    def probes_each_model(self, source: Source | None, target: Target) -> bool:
        """Whether readiness is one request per model (Triton's ``/v2/models/<m>/ready``)
        rather than one per engine (vLLM's ``/health``)."""
        return source is not None and isinstance(source.readiness, ModelReadyProbe) \
            and target.api_url is not None

    async def readiness(self, source: Source | None, target: Target,
                        observed: Sequence[str]) -> dict[str, str | None]:
        """``{model: None when ready, else why not}`` for the target's ``models`` (else
        those ``observed``), at most :attr:`concurrency` requests at a time; why is
        ``GET URL: HTTP 500``, ``… timeout after N s`` or ``… connection failed: …``.
        ``{}`` when the source declares no readiness probe (or needs an ``api_url`` the
        target lacks)."""
        probe = source.readiness if source is not None else None
        names = list(target.models or observed)
        if isinstance(probe, ModelReadyProbe) and target.api_url is not None:
            base = str(target.api_url).rstrip("/")
            why = await self._bounded([self.problem(base + probe.path.format(model=_q(m)))
                                       for m in names])
            return dict(zip(names, why, strict=True))
        if isinstance(probe, HealthProbe):
            url = str(target.health_url) if target.health_url else \
                _sibling(str(target.url), probe.path)
            problem = await self.problem(url)
            return {m: problem for m in (names or ["(engine)"])}
        return {}

    async def runtimes(self, probe: RuntimeProbe, target: Target, models: Sequence[str]
                       ) -> list[tuple[str | None, str | None]]:
        """For each model, ``(runtime, None)``, ``(None, problem)`` when the answer cannot
        be read, or ``(None, None)`` when there was no answer (ask again later)."""
        assert target.api_url is not None
        base = str(target.api_url).rstrip("/")
        return await self._bounded([self.runtime(probe, base, m) for m in models])

    async def runtime(self, probe: RuntimeProbe, base: str, model: str
                      ) -> tuple[str | None, str | None]:
        """One model's runtime (see :meth:`runtimes`)."""
        session = self._session()
        assert session is not None, "the scraper's session is not open"
        try:
            async with session.get(base + probe.path.format(model=_q(model))) as resp:
                if resp.status != 200:
                    return None, None
                doc = await resp.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return None, None
        except ValueError:
            return None, "not JSON"
        return probe.interpret(doc)

    async def identity(self, probe: IdentityProbe, target: Target) -> dict[str, str] | None:
        """What the server says about itself (``engine_version``, maybe ``quantization``),
        or ``None`` when it cannot be asked (no ``api_url``, and the API is not on the
        metrics port) or did not answer a readable JSON document (ask again later)."""
        if target.api_url is not None:
            base = str(target.api_url).rstrip("/")
        elif probe.same_port:
            base = _sibling(str(target.url), "")
        else:
            return None
        session = self._session()
        assert session is not None, "the scraper's session is not open"
        try:
            async with session.get(base + probe.path) as resp:
                if resp.status != 200:
                    return None
                doc = await resp.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            return None
        ident = probe.interpret(doc)
        return ident or None

    async def problem(self, url: str) -> str | None:
        """None when ``GET url`` answers 200 within the timeout, else what happened
        (``GET URL: HTTP 503``, ``GET URL: timeout``, ``GET URL: connection failed: …``)."""
        session = self._session()
        assert session is not None, "the scraper's session is not open"
        try:
            async with session.get(url) as resp:
                return None if resp.status == 200 else f"GET {url}: HTTP {resp.status}"
        except asyncio.TimeoutError:
            return f"GET {url}: timeout"
        except aiohttp.ClientError as exc:
            return f"GET {url}: connection failed: {type(exc).__name__}: {exc}"


def _sibling(url: str, path: str) -> str:
    """``http://h:p/metrics`` → ``http://h:p/health``."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0]
    return f"{scheme}://{host}{path}"


def _q(model: str) -> str:
    """A model name as one URL path segment (a name with ``/``, ``?`` or ``..`` must not
    reach another endpoint of the server)."""
    return urllib.parse.quote(model, safe="")
