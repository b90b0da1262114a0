"""The sidecar's governance watch: declared vs running configuration, and the lint.

Every ``scrape.config_interval_seconds`` (not every scrape), :meth:`ConfigWatch.run`
reads each live Triton target's running configuration with its API (``api_url``): the
repository index (``POST /v2/repository/index``) and ``GET /v2/models/<m>/config`` of at
most :attr:`ConfigWatch.MAX_MODELS` models it serves, each request bounded by the scrape
timeout and the whole read by the interval; a vLLM or SGLang target's running
configuration is its identity (``/version``), which the scraper already asks. It then

* compares each model with its registry declaration (:mod:`fleetwatch.governance.drift`),
* counts a change of a model's running configuration (``modelserver_model_config_changes_total``),
* lints the Triton model configurations (:mod:`fleetwatch.governance.lint`), with the
  first-response histograms present or not in the target's last body (a body observer
  looks for ``nv_inference_first_response_histogram_ms``),

and keeps the rendered families, which ``/metrics`` serves as they are (never waiting on
a read). A read that fails or does not parse counts
``fleetwatch_config_reads_failed_total{target}`` and is logged once until the target
answers again; its models keep their last known configuration. Models not served any
more are forgotten, so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from fleetwatch.exporters.sources import OPENAI_SERVER_KINDS
from fleetwatch.governance import drift, lint
from fleetwatch.governance.running import (
    RunningConfig,
    engine_running,
    index_by_model,
    triton_running,
)
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.labels.schema import metric
from fleetwatch.labels.text import render_labels
from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.targets import TargetState

log = logging.getLogger("fleetwatch.governance")

#: The family whose presence says Triton runs with ``histogram_latencies=true``.
FIRST_RESPONSE_FAMILY = "nv_inference_first_response_histogram_ms"


def declaration(registry: Registry, model: str) -> ModelEntry | None:
    """The first registry entry naming ``model`` (globs allowed) with a ``declared:``
    block, whatever its version: the declaration says which version must run."""
    return next((e for e in registry.entries
                 if e.declared is not None and fnmatch.fnmatchcase(model, e.name)), None)


@dataclass(slots=True)
class _TargetRead:
    """One target's last read: model → configuration document, the repository index."""

    configs: dict[str, object] = field(default_factory=dict)
    index: object = None
    failing: bool = False


@dataclass(frozen=True, slots=True)
class WatchResult:
    """The last evaluation: drifts, findings (for the status page)."""

    drifts: tuple[drift.FieldDrift, ...] = ()
    findings: tuple[lint.Finding, ...] = ()


class ConfigWatch:
    """See the module docstring; :meth:`metrics` is the last evaluation's exposition."""

    MAX_MODELS = 1000

    def __init__(self, cfg: SidecarConfig, registry: Registry,
                 states: dict[str, TargetState],
                 not_ready_allowance: Callable[[str], float] | None = None) -> None:
        self.cfg = cfg
        self.registry = registry
        self.states = states
        self.not_ready_allowance = not_ready_allowance
        self._reads: dict[str, _TargetRead] = {}
        self._histograms: dict[str, bool] = {}  # target → first-response family seen
        self._running: dict[tuple[str, str], RunningConfig] = {}  # (model, backend)
        self.changes: dict[tuple[str, str], int] = {}
        self.failures: Counter[str] = Counter()
        self.last = WatchResult()
        self._text = b""

    # -- hooks -------------------------------------------------------------------------
    @staticmethod
    def wants_body(st: TargetState) -> bool:
        """Whether the body observer reads this target's bodies (Triton's)."""
        return st.kind == "triton"

    def observe_body(self, st: TargetState, text: str) -> None:
        """Body observer (in a worker thread): whether first-response histograms exist."""
        self._histograms[st.target.name] = FIRST_RESPONSE_FAMILY in text

    def metrics(self) -> bytes:
        """The drift, change, findings and failure families (text format 0.0.4)."""
        return self._text

    def chain(self, other: Callable[[], bytes] | None) -> Callable[[], bytes]:
        """``other`` followed by :meth:`metrics` (the same bytes while neither changed)."""
        if other is None:
            return self.metrics
        first = other
        cache: list[bytes] = [b"", b"", b""]

        def joined() -> bytes:
            a, b = first(), self.metrics()
            if a is not cache[0] or b is not cache[1]:
                cache[:] = [a, b, a + b]
            return cache[2]
        return joined

    # -- the periodic read ---------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Read and evaluate every ``scrape.config_interval_seconds`` until ``stop``."""
        every = self.cfg.scrape.config_interval_seconds
        timeout = aiohttp.ClientTimeout(total=self.cfg.scrape.timeout_seconds)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(self.refresh(session), timeout=every)
                except asyncio.TimeoutError:
                    log.warning("reading the running model configurations took longer than "
                                "scrape.config_interval_seconds (%g s): cut short", every)
                except Exception:  # a bug must not stop the sidecar
                    log.exception("configuration watch failed")
                self.evaluate()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=every)

    async def refresh(self, session: aiohttp.ClientSession) -> None:
        """Read every live Triton target's index and model configurations."""
        for name in set(self._reads) - set(self.states):
            del self._reads[name]
        for name, st in self.states.items():
            if st.kind != "triton" or not st.up or st.normalized is None \
                    or st.target.api_url is None:
                continue
            await self._read_target(session, name, st)

    async def _read_target(self, session: aiohttp.ClientSession, name: str,
                           st: TargetState) -> None:
        assert st.normalized is not None and st.target.api_url is not None
        base = str(st.target.api_url).rstrip("/")
        read = self._reads.setdefault(name, _TargetRead())
        models = sorted({m[0] for m in st.normalized.models})[:self.MAX_MODELS]
        for gone in set(read.configs) - set(models):
            del read.configs[gone]
        problems: list[str] = []
        index = await _request(session, "POST", f"{base}/v2/repository/index", problems)
        if index is not None:
            read.index = index
        sem = asyncio.Semaphore(self.cfg.scrape.probe_concurrency)

        async def one(model: str) -> None:
            url = f"{base}/v2/models/{urllib.parse.quote(model, safe='')}/config"
            async with sem:
                doc = await _request(session, "GET", url, problems)
            if isinstance(doc, dict):
                read.configs[model] = doc
            elif doc is not None:
                problems.append(f"GET {url}: not a JSON object")
        await asyncio.gather(*(one(m) for m in models))
        if problems:
            self.failures[name] += len(problems)
            if not read.failing:
                log.warning("target %s: cannot read the running model configuration "
                            "(%d failed, first: %s); keeping the last one", name,
                            len(problems), problems[0])
            read.failing = True
        elif read.failing:
            read.failing = False
            log.info("target %s: running model configuration readable again", name)

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self) -> WatchResult:
        """Compare, count changes, lint; render the families. Pure but for this state."""
        running = self._running_now()
        for key, cfg in running.items():
            before = self._running.get(key)
            if before is not None and before != cfg:
                self.changes[key] = self.changes.get(key, 0) + 1
                log.info("model %s: running configuration changed: %s", key[0],
                         _difference(before, cfg))
            self.changes.setdefault(key, 0)
        self._running = running
        for key in set(self.changes) - set(running):
            del self.changes[key]
        drifts = []
        for (model, _backend), cfg in sorted(running.items()):
            entry = declaration(self.registry, model)
            if entry is not None and entry.declared is not None:
                drifts += drift.compare(model, entry.declared, cfg)
        findings = lint.lint(self._lint_inputs(), self.not_ready_allowance)
        self.last = WatchResult(tuple(drifts), tuple(findings))
        self._text = (drift.exposition(drifts, self.changes) + lint.exposition(findings)
                      + self._failures_text()).encode()
        return self.last

    def _running_now(self) -> dict[tuple[str, str], RunningConfig]:
        out: dict[tuple[str, str], RunningConfig] = {}
        for name, st in self.states.items():
            if not st.up or st.normalized is None:
                continue
            models = st.normalized.models
            if st.kind == "triton":
                read = self._reads.get(name)
                if read is None:
                    continue
                index = index_by_model(read.index)
                for model in sorted({m[0] for m in models})[:self.MAX_MODELS]:
                    out[(model, "triton")] = triton_running(
                        read.configs.get(model), index.get(model, []) if index is not None
                        else read.index, model, st.identity)
            else:
                names = sorted({m[0] for m in models})[:self.MAX_MODELS]
                for model in names:
                    out[(model, st.kind or "unknown")] = engine_running(
                        st.identity, (m[1] for m in models if m[0] == model))
        return out

    def _lint_inputs(self) -> list[lint.ModelFacts]:
        facts = []
        for name, read in sorted(self._reads.items()):
            hist = self._histograms.get(name)
            for model, doc in sorted(read.configs.items()):
                if isinstance(doc, dict):
                    facts.append(lint.ModelFacts(model, doc, self.registry.lookup(model),
                                                 hist))
        for st in self.states.values():  # engines without a model configuration
            if st.up and st.normalized is not None and st.kind in OPENAI_SERVER_KINDS:
                for model in sorted({m[0] for m in st.normalized.models})[:self.MAX_MODELS]:
                    facts.append(lint.ModelFacts(model, {}, self.registry.lookup(model),
                                                 runtime=st.kind))
        return facts

    def _failures_text(self) -> str:
        name = "fleetwatch_config_reads_failed_total"
        lines = [f"# HELP {name} {metric(name).exposition_help}", f"# TYPE {name} counter"]
        lines += [f"{name}{render_labels((('target', t),))} {self.failures[t]}"
                  for t in sorted(self.states) if self.states[t].kind == "triton"
                  and self.states[t].target.api_url is not None]
        return "\n".join(lines) + "\n"


def _difference(before: RunningConfig, after: RunningConfig) -> str:
    a, b = drift.values(before), drift.values(after)
    return "; ".join(f"{k} {a.get(k, '?')!r} → {b.get(k, '?')!r}" for k in drift.FIELDS
                     if a.get(k) != b.get(k)) or "(fields unknown)"


async def _request(session: aiohttp.ClientSession, method: str, url: str,
                   problems: list[str]) -> object | None:
    """The JSON answer of ``method url``, or None with the problem appended."""
    try:
        async with session.request(method, url, json={} if method == "POST" else None) as r:
            if r.status != 200:
                problems.append(f"{method} {url}: HTTP {r.status}")
                return None
            doc: object = await r.json(content_type=None)
            return doc
    except asyncio.TimeoutError:
        problems.append(f"{method} {url}: timeout")
    except (aiohttp.ClientError, ValueError) as exc:
        problems.append(f"{method} {url}: {type(exc).__name__}: {exc}")
    return None


def attach(cfg: SidecarConfig, registry: Registry | None, scraper: Scraper,
           not_ready_allowance: Callable[[str], float] | None = None) -> ConfigWatch:
    """A :class:`ConfigWatch` hooked into ``scraper`` (its body observer)."""
    watch = ConfigWatch(cfg, registry or Registry(), scraper.states, not_ready_allowance)
    scraper.body_observers.append((watch.wants_body, watch.observe_body))
    return watch
