"""Concurrent scraping of upstream targets into normalized, timestamped snapshots.

Every ``interval_seconds`` all targets are fetched concurrently (aiohttp), each bounded
by ``timeout_seconds``; bodies are normalized (in a worker thread, so the event loop
keeps serving) and combined into one :class:`Snapshot`. A target that is down, slow,
answers HTTP 500, an HTML page or garbage is marked ``up=0`` with an error reason, its
series are withdrawn (no stale values are served as fresh), one log line says what is
wrong, and the other targets carry on. Snapshot subscribers (the SLO engine) get every
snapshot in order.

The fetch asks for the text format 0.0.4 (which keeps vLLM's colons) and accepts
OpenMetrics and gzip. The whole body is read (however it is chunked or paced) within the
total timeout: a body cut short (connection closed, fewer bytes than its Content-Length, a
gzip stream without its end) is ``truncated``, never parsed as if complete; more than
``max_body_bytes`` (after decompression) is ``too_large``.

Per-model facts (runtime, readiness) are forgotten once a model has not been observed for
:data:`FORGET_AFTER_SCRAPES` successful scrapes, so churning model names do not grow memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from fleetwatch.config import SidecarConfig, Target
from fleetwatch.exporters.mapping import Normalized, Normalizer, TargetContext, render
from fleetwatch.exporters.parser import describe_if_not_metrics
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES, detect_kind
from fleetwatch.exporters.triton import runtime_from_model_config
from fleetwatch.labels.registry import Registry

log = logging.getLogger("fleetwatch.scraper")

ACCEPT = ("text/plain;version=0.0.4;q=1.0,application/openmetrics-text;version=1.0.0;q=0.5,"
          "*/*;q=0.1")

#: A model not observed in this many successful scrapes of its target is forgotten
#: (learned runtime, readiness, log bookkeeping); it is learned again if it comes back.
FORGET_AFTER_SCRAPES = 10


class ScrapeError(Exception):
    """A failed scrape; ``reason`` is the ``fleetwatch_upstream_scrape_errors_total`` label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class TargetState:
    """What the sidecar knows about one target (read by /metrics, /readyz and the engine)."""

    target: Target
    kind: str | None = None
    normalizer: Normalizer | None = None
    up: bool = False
    answered: bool = False
    last_error: str | None = None
    last_reason: str | None = None
    last_success: float | None = None
    duration: float = 0.0
    errors: Counter = field(default_factory=Counter)
    invalid_lines_total: int = 0
    normalized: Normalized | None = None
    runtimes: dict[str, str] = field(default_factory=dict)
    models_ready: dict[str, bool] = field(default_factory=dict)
    invalid_signature: tuple[int, tuple[str, ...]] | None = None
    scrapes_ok: int = 0
    last_seen: dict[str, int] = field(default_factory=dict)  # model → scrapes_ok when seen
    exposed_unknown: set[str] = field(default_factory=set)  # exposed before runtime known
    unreadable_config: set[str] = field(default_factory=set)  # logged once per model

    def runtime_for(self, model: str) -> str:
        return self.runtimes.get(model) or self.target.runtime or "unknown"

    @property
    def ready(self) -> bool:
        return self.up and all(self.models_ready.values())


class Scraper:
    """Scrapes the configured targets; holds the latest rendered normalized body."""

    def __init__(self, cfg: SidecarConfig, registry: Registry | None = None) -> None:
        self.cfg = cfg
        self.registry = registry or Registry()
        self.states = {t.name: TargetState(t) for t in cfg.targets}
        self.body: bytes = b""
        self.snapshot: Snapshot | None = None
        self.subscribers: list[Callable[[Snapshot], None]] = []
        self._session: aiohttp.ClientSession | None = None
        self._metrics_session: aiohttp.ClientSession | None = None

    # -- lifecycle ----------------------------------------------------------------
    async def __aenter__(self) -> Scraper:
        timeout = aiohttp.ClientTimeout(total=self.cfg.scrape.timeout_seconds)
        self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=True)
        # /metrics bodies are decompressed here, not by aiohttp: a gzip stream cut short
        # is then detected, and max_body_bytes bounds the decompressed size.
        self._metrics_session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for session in (self._session, self._metrics_session):
            if session:
                await session.close()

    async def run(self, stop: asyncio.Event) -> None:
        """Scrape on a fixed interval until ``stop`` is set (cycles never overlap)."""
        interval = self.cfg.scrape.interval_seconds
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                await self.scrape_once()
            except Exception:  # a bug must not stop the sidecar: log it, go on
                log.exception("scrape cycle failed")
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind: skip missed ticks rather than burst
                next_at = time.monotonic()
                delay = 0
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)

    # -- one cycle ------------------------------------------------------------------
    async def scrape_once(self) -> Snapshot:
        """Scrape every target once, concurrently; publish and return the snapshot."""
        assert self._session is not None, "use 'async with Scraper(...)'"
        ts = time.time()
        await asyncio.gather(*(self._scrape_target(s) for s in self.states.values()))
        snap = Snapshot(ts, {n: (s.normalized if s.up else None)
                             for n, s in self.states.items()})
        live = [n for n in snap.targets.values() if n is not None]
        models = {m for n in live for m in n.models}
        extra = {"modelserver_model_info": self.registry.info_lines(models)}
        self.body = (await asyncio.to_thread(render, live, extra)).encode()
        self.snapshot = snap
        for sub in self.subscribers:
            try:
                sub(snap)
            except Exception:
                log.exception("snapshot subscriber failed")
        return snap

    async def _scrape_target(self, st: TargetState) -> None:
        t0 = time.perf_counter()
        try:
            text = await self._fetch(st.target)
            normalized = await asyncio.to_thread(self._normalize, st, text)
            if await self._learn_runtimes(st, normalized):
                # new models: label them with their runtime from the first scrape on
                normalized = await asyncio.to_thread(self._normalize, st, text)
        except ScrapeError as exc:
            self._mark_down(st, exc.reason, str(exc))
        except Exception as exc:  # unexpected: still never crash the sidecar
            log.exception("target %s: unexpected error", st.target.name)
            self._mark_down(st, "internal", f"{type(exc).__name__}: {exc}")
        else:
            self._mark_up(st, normalized)
            await self._refresh_model_facts(st)
            self._forget_unseen_models(st)
        st.duration = time.perf_counter() - t0

    async def _fetch(self, target: Target) -> str:
        assert self._metrics_session is not None
        url = str(target.url)
        limit = self.cfg.scrape.max_body_bytes
        try:
            async with self._metrics_session.get(
                    url, headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"}) as resp:
                if resp.status != 200:
                    raise ScrapeError("http_status", f"HTTP {resp.status} from {url}")
                ctype = resp.headers.get("Content-Type", "")
                reader = _BodyReader(resp.headers.get("Content-Encoding", ""), limit, url)
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    reader.feed(chunk)
                body = reader.finish()
        except asyncio.TimeoutError:
            raise ScrapeError("timeout", f"no complete answer from {url} within "
                                         f"{self.cfg.scrape.timeout_seconds} s") from None
        except aiohttp.ClientPayloadError as exc:
            raise ScrapeError("truncated", f"{url}: body cut short "
                                           f"({_payload_problem(exc)})") from None
        except aiohttp.TooManyRedirects as exc:
            raise ScrapeError("connection", f"{url}: TooManyRedirects: gave up after "
                                            f"{len(exc.history)} redirects (a loop?), last "
                                            f"to {exc.request_info.real_url}") from None
        except aiohttp.ClientResponseError as exc:  # str() of these is not readable
            raise ScrapeError("connection", f"{url}: {type(exc).__name__}: "
                                            f"{exc.message or exc.status}") from None
        except aiohttp.ClientError as exc:
            raise ScrapeError("connection", f"{url}: {exc}") from None
        try:
            text = body.decode("utf-8-sig")  # a leading BOM is tolerated
        except UnicodeDecodeError as exc:
            raise ScrapeError("decode", f"body is not UTF-8 ({exc})") from None
        stripped = text.lstrip()
        if not stripped:
            raise ScrapeError("empty", f"empty body from {url}")
        if "html" in ctype or stripped[:1] == "<":
            raise ScrapeError("not_metrics", f"{url} returned an HTML page, not metrics")
        return text

    def _normalize(self, st: TargetState, text: str) -> Normalized:
        if st.normalizer is None or st.kind == "unknown":
            kind = st.target.kind if st.target.kind != "auto" else detect_kind(text)
            if kind != st.kind:
                log.info("target %s: reading it as %s", st.target.name, kind)
            ctx = TargetContext(runtime_for=st.runtime_for,
                                extra_labels=tuple(sorted(st.target.labels.items())),
                                model_version=st.target.model_version)
            st.normalizer = Normalizer(TABLES[kind], ctx, self.cfg.passthrough_unmapped)
            st.kind = kind
        n = st.normalizer.normalize(text)
        if n.series_count == 0:
            problem = describe_if_not_metrics(text)
            if problem:
                raise ScrapeError("parse", problem)
        return n

    def _mark_up(self, st: TargetState, n: Normalized) -> None:
        was_up = st.up
        st.up = st.answered = True
        st.normalized = n
        st.last_success = time.time()
        st.last_error = st.last_reason = None
        if n.meta.invalid:
            st.invalid_lines_total += len(n.meta.invalid)
            first = n.meta.invalid[0]
            # the same problem scrape after scrape is logged once; a new count or kind
            # of problem is logged again
            signature = (len(n.meta.invalid),
                         tuple(sorted({bad.reason for bad in n.meta.invalid})))
            if signature != st.invalid_signature:
                st.invalid_signature = signature
                log.warning("target %s: skipped %d malformed line(s); first at line %d: %s: %r",
                            st.target.name, len(n.meta.invalid), first.lineno, first.reason,
                            first.line[:120])
        elif st.invalid_signature is not None:
            st.invalid_signature = None
            log.info("target %s: no malformed lines any more", st.target.name)
        st.scrapes_ok += 1
        seen = st.scrapes_ok
        learns = st.kind == "triton" and st.target.api_url is not None
        for model in {m[0] for m in n.models}:
            st.last_seen[model] = seen
            if learns and model not in st.runtimes:
                st.exposed_unknown.add(model)  # its runtime label is the fallback for now
        if not was_up:
            log.info("target %s (%s): up, %d series", st.target.name, st.kind, n.series_count)

    def _mark_down(self, st: TargetState, reason: str, message: str) -> None:
        st.errors[reason] += 1
        if st.up or st.last_reason != reason:
            log.warning("target %s: down (%s): %s", st.target.name, reason, message)
        st.up = False
        st.normalized = None
        st.last_error, st.last_reason = message, reason

    # -- model facts: runtime (Triton model config) and readiness ------------------
    async def _refresh_model_facts(self, st: TargetState) -> None:
        t = st.target
        n = st.normalized
        observed = sorted({m[0] for m in n.models}) if n else []
        before = st.models_ready
        if st.kind == "triton" and t.api_url:
            base = str(t.api_url).rstrip("/")
            names = t.models or observed
            ready = await asyncio.gather(*(self._get_ok(f"{base}/v2/models/{_q(m)}/ready")
                                           for m in names))
            st.models_ready = dict(zip(names, ready, strict=True))
        elif st.kind == "vllm":
            url = str(t.health_url) if t.health_url else _sibling(str(t.url), "/health")
            ok = await self._get_ok(url)
            st.models_ready = {m: ok for m in (t.models or observed or ["(engine)"])}
        else:
            st.models_ready = {}
        for model, ok in st.models_ready.items():  # one line per change
            was = before.get(model)
            if not ok and was is not False:
                log.warning("target %s: model %s not ready", t.name, model)
            elif ok and was is False:
                log.info("target %s: model %s ready again", t.name, model)

    def _forget_unseen_models(self, st: TargetState) -> None:
        """Drop per-model facts of models not observed for FORGET_AFTER_SCRAPES scrapes."""
        oldest = st.scrapes_ok - FORGET_AFTER_SCRAPES
        gone = [m for m, seen in st.last_seen.items() if seen <= oldest]
        if not gone:
            return
        keep_ready = set(st.target.models)
        for m in gone:
            del st.last_seen[m]
            st.runtimes.pop(m, None)
            st.exposed_unknown.discard(m)
            st.unreadable_config.discard(m)
            if m not in keep_ready:
                st.models_ready.pop(m, None)

    async def _learn_runtimes(self, st: TargetState, n: Normalized) -> bool:
        """Read the runtime of models not seen before from Triton's model configuration
        (``/v2/models/<m>/config``); True when one was learned (the caller re-normalizes).
        A model whose configuration cannot be read is retried on the next scrape."""
        t = st.target
        if st.kind != "triton" or not t.api_url:
            return False
        unknown = sorted({m[0] for m in n.models} - st.runtimes.keys())
        if not unknown:
            return False
        base = str(t.api_url).rstrip("/")
        learned = await asyncio.gather(*(self._triton_runtime(base, m) for m in unknown))
        changed = False
        for m, (rt, problem) in zip(unknown, learned, strict=True):
            if rt is not None:
                st.runtimes[m] = rt
                st.unreadable_config.discard(m)
                changed = True
                if m in st.exposed_unknown:
                    st.exposed_unknown.discard(m)
                    log.info("target %s: model %s: runtime now %s (was exposed as %s)",
                             t.name, m, rt, t.runtime or "unknown")
            elif problem and m not in st.unreadable_config:
                st.unreadable_config.add(m)
                log.warning("target %s: model %s: cannot read its runtime from the model "
                            "config (%s); runtime=%s until it can", t.name, m, problem,
                            t.runtime or "unknown")
        if changed and st.normalizer is not None:
            st.normalizer.invalidate()
        return changed

    async def _triton_runtime(self, base: str, model: str) -> tuple[str | None, str | None]:
        """``(runtime, None)``, or ``(None, problem)`` when the model config answered but
        cannot be read, or ``(None, None)`` when it did not answer (retried next scrape)."""
        assert self._session is not None
        try:
            async with self._session.get(f"{base}/v2/models/{_q(model)}/config") as resp:
                if resp.status != 200:
                    return None, None
                config = await resp.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return None, None
        except ValueError:
            return None, "not JSON"
        if not isinstance(config, dict):
            return None, f"expected a JSON object, got {type(config).__name__}"
        for key in ("backend", "platform"):
            value = config.get(key)
            if value is not None and not isinstance(value, str):
                return None, f"{key!r} is a {type(value).__name__}, not a string"
        return runtime_from_model_config(config), None

    async def _get_ok(self, url: str) -> bool:
        assert self._session is not None
        try:
            async with self._session.get(url) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return False


class _BodyReader:
    """Accumulates a response body, decompressing gzip/deflate itself, up to ``limit``
    bytes of decompressed data (``too_large`` beyond); ``finish`` raises ``truncated``
    when a compressed stream ends before its end marker."""

    def __init__(self, encoding: str, limit: int, url: str) -> None:
        self.limit = limit
        self.url = url
        self.buf = bytearray()
        self._fed = False
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._z = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        else:
            raise ScrapeError("decode", f"{url}: unsupported Content-Encoding {encoding!r}")

    def _append(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > self.limit:
            raise ScrapeError("too_large", f"{self.url}: body larger than {self.limit} bytes")

    def feed(self, data: bytes) -> None:
        if self._z is None:
            self._append(data)
            return
        self._fed = self._fed or bool(data)
        try:
            while data:
                if self._z.eof:  # another gzip member follows (concatenated gzip is valid)
                    if not data.strip(b"\0 \t\r\n"):
                        return  # padding after the stream
                    self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)
                # max_length bounds the memory of a decompression bomb
                self._append(self._z.decompress(data, self.limit + 1 - len(self.buf)))
                data = self._z.unconsumed_tail or self._z.unused_data
        except zlib.error as exc:
            raise ScrapeError("decode", f"{self.url}: corrupt compressed body ({exc})") from None

    def finish(self) -> bytes:
        if self._z is not None and self._fed and not self._z.eof:
            raise ScrapeError("truncated", f"{self.url}: body cut short (compressed "
                                           "stream ends before its end)")
        return bytes(self.buf)


def _payload_problem(exc: aiohttp.ClientPayloadError) -> str:
    """The readable part of aiohttp's payload error (which wraps the parser's error)."""
    cause = exc.__cause__ or (exc.args[0] if exc.args else None)
    message = getattr(cause, "message", None)
    if isinstance(message, str) and message:
        return message
    return str(exc).replace("\n", " ").strip() or type(exc).__name__


def _sibling(url: str, path: str) -> str:
    """``http://h:p/metrics`` → ``http://h:p/health``."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0]
    return f"{scheme}://{host}{path}"


def _q(model: str) -> str:
    """A model name as one URL path segment (a name with ``/``, ``?`` or ``..`` must not
    reach another Triton endpoint)."""
    return urllib.parse.quote(model, safe="")
