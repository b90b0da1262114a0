"""Concurrent scraping of upstream targets into normalized, timestamped snapshots.

Every ``interval_seconds`` all targets are fetched concurrently (aiohttp), each bounded
by ``timeout_seconds``; bodies are normalized (in a worker thread, so the event loop
keeps serving) and combined into one :class:`Snapshot`. A target that is down, slow,
answers HTTP 500, an HTML page or garbage is marked ``up=0`` with an error reason, its
series are withdrawn (no stale values are served as fresh), one log line says what is
wrong, and the other targets carry on. Snapshot subscribers (the SLO engine) get every
snapshot in order.

Fetching is :mod:`fleetwatch.sidecar.fetch`; readiness and runtime discovery are what each
target's :class:`~fleetwatch.exporters.source.Source` declares, asked by
:mod:`fleetwatch.sidecar.probes`. After each cycle the normalized families and the
passed-through ones are kept apart (:attr:`Scraper.normalized_part`,
:attr:`Scraper.passthrough_part`) for the ``/metrics`` assembler; :attr:`Scraper.body` is
both merged.

Per-model facts (runtime, readiness) are forgotten once a model has not been observed for
:data:`FORGET_AFTER_SCRAPES` successful scrapes, so churning model names do not grow memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable

import aiohttp

from fleetwatch.exporters.assemble import NORMALIZED, PASSTHROUGH, Family, Part, assemble
from fleetwatch.exporters.normalize import Normalized, Normalizer
from fleetwatch.exporters.parser import describe_if_not_metrics
from fleetwatch.exporters.render import normalized_families, passthrough_families
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.source import unmapped_summary
from fleetwatch.exporters.sources import SOURCES_BY_KIND, TABLES, detect_kind
from fleetwatch.exporters.table import TargetContext
from fleetwatch.exporters.validate import Limits
from fleetwatch.labels.registry import Registry
from fleetwatch.sidecar.coldstart import ColdStarts
from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.sidecar.encoding import gzip_member
from fleetwatch.sidecar.fetch import ScrapeError, fetch_metrics
from fleetwatch.sidecar.probes import Prober
from fleetwatch.sidecar.targets import TargetState, readiness_due, sleeping_models
from fleetwatch.sidecar.warmup import WarmupGate

log = logging.getLogger("fleetwatch.scraper")

#: A model not observed in this many successful scrapes of its target is forgotten
#: (learned runtime, readiness, log bookkeeping); it is learned again if it comes back.
FORGET_AFTER_SCRAPES = 10


class Scraper:
    """Scrapes the configured targets; holds the latest rendered normalized body."""

    def __init__(self, cfg: SidecarConfig, registry: Registry | None = None) -> None:
        self.cfg = cfg
        self.registry = registry or Registry()
        self.states = {t.name: TargetState(t) for t in cfg.targets}
        #: The normalized families of the last cycle (all live targets, one part).
        self.normalized_part = Part(NORMALIZED, [], check_names=False, check_series=False)
        #: Upstream families passed through in the last cycle, merged across targets.
        self.passthrough_part = Part(PASSTHROUGH, [], check_series=False)
        #: Normalized series the last cycle left out: a second target produced them too.
        self.collisions = 0
        #: Series the last cycle left out of its parts, by origin (normalized: a second
        #: target produced them too; passthrough: a second target passed them through).
        self.dropped: Counter[str] = Counter()
        #: Each family of both parts as ``id(family) → (family, gzip member)``, encoded
        #: once per cycle (:mod:`.encoding`; the /metrics assembler serves them).
        self.encoded: dict[int, tuple[Family, bytes]] = {}
        self._body: bytes | None = b""
        self.snapshot: Snapshot | None = None
        self.subscribers: list[Callable[[Snapshot], None]] = []
        #: ``(wants, observe)``: ``observe`` is called in a worker thread with each
        #: successfully scraped target that ``wants(state)`` and its raw body (what the
        #: schema drops: Triton's per-model gpu_uuid, vLLM's cache_config_info labels).
        self.body_observers: list[tuple[Callable[[TargetState], bool],
                                        Callable[[TargetState, str], None]]] = []
        self._session: aiohttp.ClientSession | None = None
        self._metrics_session: aiohttp.ClientSession | None = None
        self.probes = Prober(lambda: self._session, cfg.scrape.probe_concurrency)
        #: Not-ready → ready durations per (target, model), from the readiness probes.
        self.cold_starts = ColdStarts()
        #: Which models ran their registry warm-up (None: no entry has one); /readyz.
        self.warmup = WarmupGate(self.registry) if WarmupGate.wanted(self.registry) else None
        if self.warmup is not None:
            self.subscribers.append(self.warmup.observe)

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
        seen = time.time()
        for name, s in self.states.items():
            self.cold_starts.observe(name, s.up, s.models_ready, s.target.models, seen)
        snap = Snapshot(ts, {n: (s.normalized if s.up else None)
                             for n, s in self.states.items()},
                        {n: s.last_reason or "down" for n, s in self.states.items()
                         if not s.up})
        live = [n for n in snap.targets.values() if n is not None]
        models = {m for n in live for m in n.models}
        identity = {m: s.identity for s in self.states.values()
                    if s.up and s.normalized is not None and s.identity
                    for m in s.normalized.models}
        extra = {"modelserver_model_info": self.registry.info_lines(models, identity)}
        await asyncio.to_thread(self._render, live, extra)
        self.snapshot = snap
        for sub in self.subscribers:
            try:
                sub(snap)
            except Exception:
                log.exception("snapshot subscriber failed")
        return snap

    @property
    def body(self) -> bytes:
        """Both parts of the last cycle merged: what it normalized, as text (made when
        first read after a cycle)."""
        if self._body is None:
            self._body = assemble([self.normalized_part, self.passthrough_part]).text.encode()
        return self._body

    def _render(self, live: list[Normalized], extra: dict[str, list[str]]) -> None:
        collisions: list[str] = []
        families = normalized_families(live, extra, collisions)
        if collisions and len(collisions) != self.collisions:
            log.warning("%d normalized series produced by two targets (first: %s): served "
                        "once; give the targets distinct labels:", len(collisions),
                        collisions[0])
        merged = assemble([Part(PASSTHROUGH, passthrough_families(n))
                           for n in live if n.passthrough])
        encoded = {}
        for fam in (*families, *merged.families):  # the plain text is made when asked
            encoded[id(fam)] = (fam, gzip_member(fam.text().encode()))
        # published together (the /metrics handler reads them on the event loop; a
        # family it finds without its encoding is encoded there, never served wrong)
        self.encoded = encoded
        self.normalized_part = Part(NORMALIZED, families, check_names=False,
                                    check_series=False)
        self.passthrough_part = Part(PASSTHROUGH, merged.families, check_series=False)
        self.collisions = len(collisions)
        self.dropped = merged.dropped + Counter({NORMALIZED: len(collisions)})
        self._body = None

    async def _scrape_target(self, st: TargetState) -> None:
        t0 = time.perf_counter()
        try:
            assert self._metrics_session is not None, "use 'async with Scraper(...)'"
            text = await fetch_metrics(self._metrics_session, str(st.target.url),
                                       self.cfg.scrape.max_body_bytes,
                                       self.cfg.scrape.timeout_seconds)
            normalizer = self._normalizer(st, text)
            if normalizer.ctx.defer is not None:
                # runtimes are learned: find the new models first (their series left out),
                # ask their runtime, then compile their series once, labelled with it
                first = await asyncio.to_thread(normalizer.normalize, text)
                await self._learn_runtimes(st, first.deferred)
            st.deferring = False
            try:
                normalized = await asyncio.to_thread(self._normalize, st, text)
            finally:
                st.deferring = True
        except ScrapeError as exc:
            self._mark_down(st, exc.reason, str(exc))
        except Exception as exc:  # unexpected: still never crash the sidecar
            log.exception("target %s: unexpected error", st.target.name)
            self._mark_down(st, "internal", f"{type(exc).__name__}: {exc}")
        else:
            self._mark_up(st, normalized)
            for wants, observe in self.body_observers:  # in a thread, like normalizing
                try:
                    if wants(st):
                        await asyncio.to_thread(observe, st, text)
                except Exception:  # a bug must not stop the scrape
                    log.exception("body observer failed")
            await self._refresh_identity(st)
            await self._refresh_model_facts(st)
            st.forget_unseen_models(FORGET_AFTER_SCRAPES)
        st.duration = time.perf_counter() - t0

    def _normalizer(self, st: TargetState, text: str) -> Normalizer:
        """The target's normalizer, made on its first exposition (or while its kind,
        detected from the exposition, is unknown)."""
        if st.normalizer is None or st.kind == "unknown":
            kind = st.target.kind if st.target.kind != "auto" else detect_kind(text)
            if kind != st.kind:
                log.info("target %s: reading it as %s", st.target.name, kind)
            defer = st.defer_runtime if self.probes.learns_runtimes(
                SOURCES_BY_KIND.get(kind), st.target) else None
            ctx = TargetContext(runtime_for=st.runtime_for,
                                extra_labels=tuple(sorted(st.target.labels.items())),
                                model_version=st.target.model_version, defer=defer)
            sc = self.cfg.scrape
            limits = Limits(sc.max_series, sc.max_label_value_length,
                            sc.normalize_timeout_seconds)
            st.normalizer = Normalizer(TABLES[kind], ctx, self.cfg.passthrough_unmapped,
                                       limits)
            st.kind = kind
        return st.normalizer

    def _normalize(self, st: TargetState, text: str) -> Normalized:
        n = self._normalizer(st, text).normalize(text)
        if n.refused is not None:
            raise ScrapeError(*n.refused)
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
        self._note_refusals(st, n)
        if n.unmapped and not n.unmapped <= st.unmapped_logged:
            st.unmapped_logged = frozenset(n.unmapped) | st.unmapped_logged \
                if len(st.unmapped_logged) < 10_000 else frozenset(n.unmapped)
            log.info("target %s: %s", st.target.name, unmapped_summary(
                st.source, sorted(n.unmapped),
                "passed through" if self.cfg.passthrough_unmapped else "dropped"))
        st.scrapes_ok += 1
        seen = st.scrapes_ok
        learns = self.probes.learns_runtimes(st.source, st.target)
        for model in {m[0] for m in n.models}:
            st.last_seen[model] = seen
            if learns and model not in st.runtimes:
                st.exposed_unknown.add(model)  # its runtime label is the fallback for now
        if not was_up:
            log.info("target %s (%s): up, %d series", st.target.name, st.kind, n.series_count)

    def _note_refusals(self, st: TargetState, n: Normalized) -> None:
        """Count the samples value validation refused; one log line when the set of
        reasons changes (``target T: refused N sample(s) (reason: example; …)``), one
        when there are none any more."""
        st.invalid_samples.update(n.invalid_samples)
        signature = tuple(sorted(n.invalid_samples))
        if signature == st.refused_signature:
            return
        st.refused_signature = signature
        if signature:
            log.warning("target %s: refused %d sample(s), withdrawn from /metrics and the "
                        "SLO engine: %s", st.target.name, n.invalid_samples.total(),
                        "; ".join(f"{r} ×{n.invalid_samples[r]} (e.g. "
                                  f"{n.invalid_examples.get(r, '?')[:160]})"
                                  for r in signature))
        else:
            log.info("target %s: no refused samples any more", st.target.name)

    def _mark_down(self, st: TargetState, reason: str, message: str) -> None:
        st.errors[reason] += 1
        if st.up or st.last_reason != reason:
            log.warning("target %s: down (%s): %s", st.target.name, reason, message)
        st.up = False
        st.normalized = None
        st.identity = None
        st.last_error, st.last_reason = message, reason

    # -- model facts: runtime (Triton model config), readiness, engine identity ------
    async def _refresh_identity(self, st: TargetState) -> None:
        """Ask the server's identity (the source's identity probe) until it answers."""
        source = st.source
        if st.identity is not None or source is None or source.identity is None:
            return
        st.identity = await self.probes.identity(source.identity, st.target)
        if st.identity:
            log.info("target %s: %s", st.target.name,
                     ", ".join(f"{k} {v}" for k, v in sorted(st.identity.items())))

    async def _refresh_model_facts(self, st: TargetState) -> None:
        t = st.target
        n = st.normalized
        observed = sorted({m[0] for m in n.models}) if n else []
        before = st.models_ready
        if self.probes.probes_each_model(st.source, t) and not t.models:
            # one request per model found: on their own cadence (see _due)
            sc = self.cfg.scrape
            why = await self.probes.readiness(st.source, t, readiness_due(
                st, observed, sc.interval_seconds, sc.readiness_every, time.monotonic()))
            now = time.monotonic()
            for m in why:
                st.probed_at[m] = now
            st.models_ready = {m: before[m] for m in observed if m in before}
            st.models_ready.update((m, w is None) for m, w in why.items())
        else:
            why = await self.probes.readiness(st.source, t, observed)
            st.models_ready = {m: w is None for m, w in why.items()}
        was_sleeping, st.models_sleeping = st.models_sleeping, sleeping_models(n)
        for model in st.models_sleeping:  # an engine asleep answers /health, serves nothing
            st.models_ready[model] = False
            if model not in was_sleeping:
                log.info("target %s: model %s: engine asleep (not ready)", t.name, model)
        for model, problem in why.items():  # one line per change
            was = before.get(model)
            if model in st.models_sleeping:
                continue
            if problem is not None and was is not False:
                log.warning("target %s: model %s not ready (%s)", t.name, model, problem)
            elif problem is None and was is False:
                log.info("target %s: model %s ready again", t.name, model)

    async def _learn_runtimes(self, st: TargetState, new: set[str]) -> bool:
        """Ask the runtime of the ``new`` models and of those of the last state still
        without one (the source's runtime probe, e.g. Triton's
        ``/v2/models/<m>/config``); True when one was learned (its series are compiled
        again). A model whose answer cannot be read is retried on the next scrape."""
        t = st.target
        source = st.source
        if source is None or source.runtime_probe is None or not t.api_url:
            return False
        seen = {m[0] for m in st.normalized.models} if st.normalized is not None else set()
        unknown = sorted((seen | new) - st.runtimes.keys())
        if not unknown:
            return False
        st.runtime_asked.update(unknown)
        learned = await self.probes.runtimes(source.runtime_probe, t, unknown)
        changed: list[str] = []
        for m, (rt, problem) in zip(unknown, learned, strict=True):
            if rt is not None:
                st.runtimes[m] = rt
                st.unreadable_config.discard(m)
                changed.append(m)
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
            st.normalizer.invalidate_models(changed)  # those models' series only
        return bool(changed)
