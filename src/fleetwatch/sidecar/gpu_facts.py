"""The sidecar's shared-GPU accounting: placement, footprints, quota usage and placement
policy on its node, served on ``/metrics`` (:func:`fleetwatch.gpu.assess.exposition`).

Hooked into the scraper twice: a body observer (:attr:`Scraper.body_observers`) reads
what the schema drops from each Triton and vLLM body
(:func:`~fleetwatch.gpu.discover.scan_exposition`), a snapshot subscriber re-assesses after
every cycle (a few dict walks: cheap next to a scrape) and measures the footprint of a
model version that appears on a GPU from the memory in use before and after
(:mod:`fleetwatch.gpu.loads`). :meth:`GPUAccounting.run` asks each Triton target's API
(``api_url``) every :attr:`GPUAccounting.REFRESH_SECONDS` for the model configuration
(``instance_group``, once per model) and the model statistics (``memory_usage``) of the
models it serves, at most :attr:`GPUAccounting.MAX_MODELS` per target, within the scrape
timeout; an answer that does not come or does not parse is skipped (asked again next
time). Models not served any more are forgotten, so memory stays bounded.

The sidecar's pod (for dcgm-exporter's pod mapping of standalone vLLM) is ``POD_NAME``
and ``POD_NAMESPACE`` from the environment (Kubernetes' downward API), else ``HOSTNAME``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import urllib.parse
from collections.abc import Callable

import aiohttp

from fleetwatch.exporters.assemble import Family, parse_families
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.gpu.assess import Assessment, assess, exposition
from fleetwatch.gpu.discover import ExpositionFacts, scan_exposition
from fleetwatch.gpu.discovered import TargetFacts
from fleetwatch.gpu.facts import GPUFacts, gpu_facts
from fleetwatch.gpu.loads import LoadDeltas
from fleetwatch.gpu.quota import Quotas, load_quotas
from fleetwatch.labels.placement import Placement
from fleetwatch.labels.registry import Registry
from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.targets import TargetState

log = logging.getLogger("fleetwatch.gpu")

_SCANNED = ("triton", "vllm")


def own_pod() -> tuple[str, str] | None:
    """``(namespace, pod)`` of this process from the environment (``POD_NAMESPACE`` may be
    empty), or ``None`` without ``POD_NAME`` and ``HOSTNAME``."""
    pod = os.environ.get("POD_NAME") or os.environ.get("HOSTNAME")
    return (os.environ.get("POD_NAMESPACE", ""), pod) if pod else None


class GPUAccounting:
    """See the module docstring; ``metrics()`` is the exposition of the last assessment."""

    REFRESH_SECONDS = 60.0
    MAX_MODELS = 1000

    def __init__(self, cfg: SidecarConfig, registry: Registry, quotas: Quotas | None,
                 states: dict[str, TargetState], pod: tuple[str, str] | None = None) -> None:
        self.cfg = cfg
        self.registry = registry
        self.quotas = quotas
        self.states = states
        self.pod = pod
        self.declared = cfg.declared_placement()
        self._bodies: dict[str, ExpositionFacts] = {}
        self._scan_cache: dict[str, dict[str, dict[str, str] | None]] = {}  # per target
        self._signature: object = None  # of the last assessment's inputs
        self._configs: dict[str, dict[str, object]] = {}  # target → model → config doc
        self._stats: dict[str, object] = {}  # model → statistics doc
        self.last: Assessment | None = None
        self.loads = LoadDeltas()  # footprints measured when a model appears on a GPU
        self._text = b""
        self._families: tuple[bytes, list[Family]] = (b"", [])
        #: Called with each new placement (declared overlaid with discovered facts): the
        #: SLO engine's attribution (co-location interference) reads the same placement.
        self.placement_listeners: list[Callable[[Placement], None]] = []

    # -- hooks -------------------------------------------------------------------------
    @staticmethod
    def wants_body(st: TargetState) -> bool:
        """Whether the body observer reads this target's bodies (Triton's and vLLM's)."""
        return st.kind in _SCANNED

    def observe_body(self, st: TargetState, text: str) -> None:
        """Body observer (in a worker thread): remember what the raw body says."""
        cache = self._scan_cache.setdefault(st.target.name, {})
        self._bodies[st.target.name] = scan_exposition(text, cache=cache)

    def on_snapshot(self, snap: Snapshot) -> None:
        """Snapshot subscriber: re-assess from the live targets."""
        live = {name: n for name, n in snap.targets.items() if n is not None}
        targets = []
        for name, n in live.items():
            st = self.states.get(name)
            if st is None or st.kind not in _SCANNED:
                continue
            targets.append(TargetFacts(st.kind, {(m[0], m[1]) for m in n.models},
                                       self._bodies.get(name, ExpositionFacts()),
                                       self._configs.get(name, {})))
        served = {m for t in targets for m, _v in t.models}
        gpus = gpu_facts(live.values())
        signature = _signature(targets, gpus, self._stats, self.loads.deltas)
        if signature != self._signature or self.last is None:  # else: the same placement
            self.last = assess(self.declared, live.values(), targets, self.registry,
                               self.quotas, self._stats, self.pod, served, self.loads.deltas,
                               gpus)
            self._text = exposition(self.last).encode()
            self._signature = signature
            for listener in self.placement_listeners:
                listener(self.last.placement)
        self.loads.observe(((m, v, u) for m, v, u, _n in self.last.placement.rows()),
                           gpus.used)
        for name in set(self._bodies) - set(live):
            del self._bodies[name]
            self._scan_cache.pop(name, None)

    def metrics(self) -> bytes:
        """The families of the last assessment (text format 0.0.4; empty before one)."""
        return self._text

    def schema_families(self) -> list[Family]:
        """The last assessment's ``modelserver_*`` families (placement, footprints) as
        :class:`~fleetwatch.exporters.assemble.Family` objects, for the OTLP metrics
        export beside the normalized part; parsed once per new assessment."""
        text = self._text
        if self._families[0] is not text:
            fams = [f for f in parse_families(text.decode()) if f.name.startswith("modelserver_")]
            self._families = (text, fams)
        return self._families[1]

    def chain(self, other: Callable[[], bytes] | None) -> Callable[[], bytes]:
        """``other`` (the SLO engine's exposition) followed by :meth:`metrics`. The same
        bytes object is returned while neither side changed: ``/metrics`` reuses its
        encoded SLO segment by identity (:mod:`fleetwatch.sidecar.metrics`)."""
        if other is None:
            return self.metrics
        first = other
        cache: list[bytes] = [b"", b"", b""]  # (engine body, own body, their concatenation)

        def joined() -> bytes:
            a, b = first(), self.metrics()
            if a is not cache[0] or b is not cache[1]:
                cache[:] = [a, b, a + b]
            return cache[2]
        return joined

    # -- Triton's model configuration and statistics --------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Refresh the Triton documents every :attr:`REFRESH_SECONDS` until ``stop``."""
        timeout = aiohttp.ClientTimeout(total=self.cfg.scrape.timeout_seconds)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                try:
                    await self.refresh(session)
                except Exception:  # a bug must not stop the sidecar
                    log.exception("GPU facts refresh failed")
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.REFRESH_SECONDS)

    async def refresh(self, session: aiohttp.ClientSession) -> None:
        """Ask every live Triton target for its served models' config (once) and stats."""
        stats: dict[str, object] = {}
        for name, st in self.states.items():
            if st.kind != "triton" or not st.up or st.normalized is None \
                    or st.target.api_url is None:
                continue
            base = str(st.target.api_url).rstrip("/")
            models = sorted({m[0] for m in st.normalized.models})[:self.MAX_MODELS]
            known = self._configs.setdefault(name, {})
            for gone in set(known) - set(models):
                del known[gone]
            for model in models:
                q = urllib.parse.quote(model, safe="")
                if model not in known:
                    doc = await _get_json(session, f"{base}/v2/models/{q}/config")
                    if doc is not None:
                        known[model] = doc
                doc = await _get_json(session, f"{base}/v2/models/{q}/stats")
                if doc is not None:
                    stats[model] = doc
        self._stats = stats


def _signature(targets: list[TargetFacts], gpus: GPUFacts, stats: object,
               deltas: dict[tuple[str, str, str], int]) -> object:
    """What an assessment depends on, comparable: unchanged, the last one still holds (the
    memory in use is not in it: only load deltas, which are, read it)."""
    return (tuple((t.kind, frozenset(t.models),
                   frozenset((k, frozenset(v)) for k, v in t.exposition.triton_gpus.items()),
                   tuple(tuple(sorted(c.items())) for c in t.exposition.vllm_cache),
                   tuple(sorted((m, id(d)) for m, d in t.configs.items()))) for t in targets),
            tuple(sorted((u, f.bytes) for u, f in gpus.total.items())),
            tuple(sorted(gpus.index.items())),
            tuple(sorted((u, frozenset(p)) for u, p in gpus.pods.items())),
            id(stats), tuple(sorted(deltas.items())))


async def _get_json(session: aiohttp.ClientSession, url: str) -> object | None:
    try:
        async with session.get(url) as resp:
            if resp.status != 200:
                return None
            doc: object = await resp.json(content_type=None)
            return doc
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None


def attach(cfg: SidecarConfig, registry: Registry | None, scraper: Scraper) -> GPUAccounting:
    """A :class:`GPUAccounting` hooked into ``scraper`` (body observer and snapshot
    subscriber), with the configuration's quota file loaded. Raises
    :class:`~fleetwatch.gpu.quota.QuotaError` for a bad quota file."""
    quotas = load_quotas(cfg.quotas) if cfg.quotas else None
    acc = GPUAccounting(cfg, registry or Registry(), quotas, scraper.states, own_pod())
    scraper.body_observers.append((acc.wants_body, acc.observe_body))
    scraper.subscribers.append(acc.on_snapshot)
    return acc
