"""Whether a model's data is fresh, and the autoscaling signal it gets when it is not.

A model's data is **stale** for one of three reasons (the ``reason`` of
``/autoscaling``'s ``freshness`` and of ``fleetwatch_autoscaling_signal_stale``):

* ``target_down`` — the target that served it is down (connection refused, HTTP error,
  garbage: any scrape error but a timeout);
* ``scrape_timeout`` — its scrape did not finish within ``scrape.timeout_seconds``
  (reason ``timeout`` of ``fleetwatch_upstream_scrape_errors_total``);
* ``frozen`` — its target answers, but the model's progress counters (of
  :data:`PROGRESS_FAMILIES`: requests finished, tokens, batch executions, preemptions)
  did not move for ``autoscaling.frozen_after_scrapes`` snapshots in a row
  while ``modelserver_requests_active`` says requests are running or waiting: an engine
  core that hangs behind an API server that still answers ``/metrics``. Unchanged counters
  with no request in flight are an idle model, which is fresh.

Missing data must never read as idle (a low signal scales the fleet in on demand nobody
measured), nor as the last load forever (the fleet keeps scaling on demand that is gone).
So a stale model's signal is **held** at the value it had when it was last fresh for
``autoscaling.stale_hold`` seconds from ``since`` (the first snapshot without fresh data),
then reads **saturated**: ``autoscaling.stale_signal`` (1.0 by default, at target: the
replica counts as full, so the fleet does not scale in on it). Fresh data makes the model
fresh again at once. Times are the snapshots' Unix timestamps (the engine's clock), so a
replay holds and saturates exactly as a live sidecar does.

A model is followed from the first snapshot in which its target exposes it, and forgotten
with the engine's other per-model state (``limits.forget_model_after``); a model the
engine knows only from trace events has no target and is always fresh.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from fleetwatch.exporters.normalized import Normalized, value_of
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.labels.schema import METRICS
from fleetwatch.slo.spec import AutoscalingSettings
from fleetwatch.slo.state import ModelKey
from fleetwatch.wording import counted

log = logging.getLogger("fleetwatch.slo.freshness")

FRESH = "fresh"
STALE = "stale"
#: Why a model's data is stale (label values of ``fleetwatch_autoscaling_signal_stale``).
REASONS = ("target_down", "scrape_timeout", "frozen")
#: Scrape error reasons read as ``scrape_timeout``; every other one is ``target_down``.
TIMEOUT_ERRORS = frozenset({"timeout"})
#: Counter families that move while an engine makes progress: requests finished (by
#: every source), tokens (vLLM and SGLang count them at every prefill and decode step),
#: batch executions and items (Triton), preemptions. (The latency histograms move with
#: these: their ``_count`` is requests or tokens again.)
PROGRESS_FAMILIES = ("modelserver_requests_total", "modelserver_tokens_total",
                     "modelserver_batch_executions_total", "modelserver_batch_items_total",
                     "modelserver_preemptions_total")
_INDEX = {m.name: i for i, m in enumerate(METRICS)}
_PROGRESS = tuple(_INDEX[name] for name in PROGRESS_FAMILIES)
_ACTIVE = _INDEX["modelserver_requests_active"]


class FreshnessStatus(TypedDict):
    """A model's freshness in ``/autoscaling`` (JSON-ready)."""

    state: str  # fresh | stale
    reason: str | None  # target_down | scrape_timeout | frozen (None when fresh)
    since: float | None  # Unix seconds: the first snapshot without fresh data (stale only)
    updated: float | None  # Unix seconds: the last snapshot with fresh data
    signal: str  # measured | held (last fresh value) | saturated (autoscaling.stale_signal)


@dataclass(slots=True)
class Progress:
    """What one snapshot says about a model's progress: ``counters`` (the sum of its
    series of :data:`PROGRESS_FAMILIES`: it moves whenever one of them does, since
    counters only grow or reset) and ``in_flight`` (requests running + waiting)."""

    counters: float
    in_flight: float


@dataclass(slots=True)
class ModelFreshness:
    """One model's freshness: its ``target``, ``updated`` (Unix seconds of the last fresh
    data), the last :class:`Progress`, how many snapshots in a row it was ``unchanged``
    while busy (and ``unchanged_since``, the first of them), the ``reason`` it is stale
    (None: fresh) and ``since`` when, and the ``held`` signal (its last fresh value)."""

    target: str
    updated: float
    progress: Progress
    unchanged: int = 0
    unchanged_since: float | None = None
    reason: str | None = None
    since: float | None = None
    held: float | None = None


_NO_MODEL = ModelKey("", "", "")


class ProgressReader:
    """Reads each model's :class:`Progress` off one target's normalized expositions. The
    model of a series prefix is looked up once and cached, so a snapshot costs one
    dictionary lookup per series read.

    The cache is bounded by what the target exposes: when it holds more than
    :attr:`CACHE_SLACK` entries per series of the exposition just read (and at least
    :attr:`CACHE_FLOOR` more than it), the prefixes that exposition did not carry are
    evicted (``evicted`` counts them). Under label churn — a model, user or adapter name
    that changes every scrape — the cache therefore holds at most about
    ``max(CACHE_SLACK × series, series + CACHE_FLOOR)`` prefixes of the progress and
    in-flight families, never every name ever seen; a prefix evicted and seen again is
    looked up again (an entry is derived data: nothing is lost)."""

    CACHE_SLACK = 2
    CACHE_FLOOR = 10_000

    def __init__(self) -> None:
        self._models: dict[str, ModelKey] = {}
        #: cached prefixes evicted so far (label churn)
        self.evicted = 0

    @property
    def cached(self) -> int:
        """Prefixes cached (≤ the bound of the class docstring after each read)."""
        return len(self._models)

    def read(self, n: Normalized) -> dict[ModelKey, Progress]:
        """Each model's progress in ``n`` (models with neither progress nor in-flight
        series are left out)."""
        totals: dict[ModelKey, float] = {}
        for idx in _PROGRESS:
            self._add(n, idx, totals)
        active: dict[ModelKey, float] = {}
        self._add(n, _ACTIVE, active)
        self._bound(n)
        return {mk: Progress(totals.get(mk, 0.0), active.get(mk, 0.0))
                for mk in totals.keys() | active.keys() if mk is not _NO_MODEL}

    def _bound(self, n: Normalized) -> None:
        """Evict the prefixes ``n`` does not carry once the cache is past its bound."""
        read = sum(len(n.families[idx]) for idx in (*_PROGRESS, _ACTIVE))
        if len(self._models) <= max(self.CACHE_SLACK * read, read + self.CACHE_FLOOR):
            return
        models = self._models
        kept = {prefix: models[prefix] for idx in (*_PROGRESS, _ACTIVE)
                for prefix in n.families[idx] if prefix in models}
        self.evicted += len(models) - len(kept)
        self._models = kept

    def _add(self, n: Normalized, idx: int, into: dict[ModelKey, float]) -> None:
        fam = n.families[idx]
        if not fam:
            return
        nums = n.numbers[idx] if n.numbers is not None else None
        values = nums if nums is not None and len(nums) == len(fam) \
            else [value_of(v) for v in fam.values()]
        models = self._models
        for prefix, v in zip(fam, values, strict=True):
            mk = models.get(prefix)
            if mk is None:
                mk = models[prefix] = _model_key(n, prefix)
            if mk is _NO_MODEL:
                continue
            into[mk] = into.get(mk, 0.0) + v


def _names(keys: list[ModelKey], shown: int = 3) -> str:
    """The first ``shown`` model names of ``keys`` in name order (with the version when
    there is one: ``ranker v1, ranker v2``) and how many more (a log line stays one
    bounded line however many models a target had)."""
    names = ", ".join(sorted(k.model + (f" v{k.model_version}" if k.model_version else "")
                             for k in keys)[:shown])
    return names + (f" and {len(keys) - shown} more" if len(keys) > shown else "")


def progress_of(n: Normalized) -> dict[ModelKey, Progress]:
    """Each model's :class:`Progress` in one normalized exposition (uncached)."""
    return ProgressReader().read(n)


def _model_key(n: Normalized, prefix: str) -> ModelKey:
    labels = dict(n.key(prefix)[1])
    model, backend = labels.get("model"), labels.get("backend")
    if model is None or backend is None:
        return _NO_MODEL
    return ModelKey(model, labels.get("model_version", ""), backend)


class Freshness:
    """Follows every model's freshness over the engine's snapshots (see the module doc).

    Call :meth:`observe` with each snapshot before the engine accounts it; it returns
    whether a model just went stale, and then :meth:`hold` with the signals computed from
    the state before that snapshot (the last fresh values). :meth:`apply` rewrites the
    signals of stale models; :meth:`status` is a model's ``freshness`` object."""

    def __init__(self, settings: AutoscalingSettings) -> None:
        self.settings = settings
        self.models: dict[ModelKey, ModelFreshness] = {}
        self.now: float | None = None
        #: target name → its reader (one each: a reader's cache is bounded by what its
        #: target exposes; targets come from the configuration)
        self.readers: dict[str, ProgressReader] = {}

    def observe(self, snap: Snapshot) -> bool:
        """Read one snapshot; True when a model went stale at it, or its counters stopped
        while busy (call :meth:`hold` with the signals of before the snapshot)."""
        ts, went_stale = snap.timestamp, False
        self.now = ts
        down = {name: ("scrape_timeout" if snap.errors.get(name) in TIMEOUT_ERRORS
                       else "target_down")
                for name, n in snap.targets.items() if n is None}
        for name, n in snap.targets.items():
            if n is not None:
                reader = self.readers.get(name)
                if reader is None:
                    reader = self.readers[name] = ProgressReader()
                went_stale |= self._observe_target(name, ts, reader.read(n))
        if down:
            newly: dict[str, list[ModelKey]] = {}
            for mk, mf in self.models.items():
                reason = down.get(mf.target)
                if reason is None:
                    continue
                went_stale |= mf.reason is None
                if self._stale(mf, reason, ts):
                    newly.setdefault(mf.target, []).append(mk)
            for target, keys in newly.items():
                what = (f"the scrape of target {target} timed out"
                        if down[target] == "scrape_timeout" else f"target {target} is down")
                self._log_stale(keys, what)
        return went_stale

    def _log_stale(self, keys: list[ModelKey], what: str) -> None:
        """One warning line for ``keys`` going stale together (a target's models: one line
        per target, not per model — a down target of 10,000 models is one event)."""
        head = (f"model {keys[0].model} ({keys[0].backend}, version {keys[0].model_version!r})"
                if len(keys) == 1 else f"{counted(len(keys), 'model')} ({_names(keys)})")
        log.warning("%s: data stale (%s): autoscaling signal held for %gs, then %g", head,
                    what, self.settings.stale_hold, self.settings.stale_signal)

    def _observe_target(self, target: str, ts: float,
                        progress: Mapping[ModelKey, Progress]) -> bool:
        went_stale = False
        frozen_after = self.settings.frozen_after_scrapes
        back: dict[str, list[ModelKey]] = {}  # reason it was stale for → models fresh again
        for mk, p in progress.items():
            mf = self.models.get(mk)
            if mf is None:
                self.models[mk] = ModelFreshness(target, ts, p)
                continue
            mf.target = target
            moved = p.counters != mf.progress.counters
            mf.progress = p
            if moved or p.in_flight <= 0:
                mf.unchanged, mf.unchanged_since = 0, None
                if mf.reason is not None:
                    back.setdefault(mf.reason, []).append(mk)
                mf.updated, mf.held, mf.reason, mf.since = ts, None, None, None
                continue
            if mf.unchanged == 0:  # the last snapshot was its last fresh one: hold it
                mf.unchanged_since = ts
                went_stale |= mf.held is None
            mf.unchanged += 1
            was_fresh = mf.reason is None
            if mf.unchanged >= frozen_after and self._stale(mf, "frozen",
                                                            mf.unchanged_since or ts):
                went_stale |= was_fresh
                self._log_stale([mk], f"its counters did not move for {mf.unchanged} "
                                      f"scrapes while {mf.progress.in_flight:g} requests "
                                      "were running or waiting (engine frozen)")
            # else: not fresh either; a stale model (back from down, busy, not moving
            # yet) keeps its reason until its counters move or it counts as frozen
        for reason, keys in back.items():
            head = (f"model {keys[0].model} ({keys[0].backend}, version "
                    f"{keys[0].model_version!r})" if len(keys) == 1
                    else f"{counted(len(keys), 'model')} of target {target} ({_names(keys)})")
            log.info("%s: data fresh again (was stale: %s)", head, reason)
        return went_stale

    @staticmethod
    def _stale(mf: ModelFreshness, reason: str, since: float) -> bool:
        """Mark a model stale for ``reason``; True when its reason changed (the caller
        logs it, one line per target for a target's reasons)."""
        if mf.reason == reason:
            return False
        if mf.reason is None:
            mf.since = since
        mf.reason = reason
        return True

    def hold(self, signals: Iterable[tuple[ModelKey, float]]) -> None:
        """Keep ``(model, signal)`` as the held value of each model without one that is
        stale or whose counters stopped while busy (dropped when it is fresh again)."""
        for mk, value in signals:
            mf = self.models.get(mk)
            if mf is not None and (mf.reason is not None or mf.unchanged) and mf.held is None:
                mf.held = value

    def signal(self, mk: ModelKey, measured: float) -> tuple[float, str]:
        """The signal to publish for a model measured at ``measured``, and how it was
        made (``measured``, ``held`` or ``saturated``)."""
        mf = self.models.get(mk)
        if mf is None or mf.reason is None:
            return measured, "measured"
        since = mf.since if mf.since is not None else mf.updated
        if self.now is not None and self.now - since >= self.settings.stale_hold:
            return self.settings.stale_signal, "saturated"
        return (mf.held if mf.held is not None else measured), "held"

    def status(self, mk: ModelKey, how: str) -> FreshnessStatus:
        """A model's ``freshness`` object; ``how``: what :meth:`signal` said."""
        mf = self.models.get(mk)
        if mf is None:
            return {"state": FRESH, "reason": None, "since": None, "updated": self.now,
                    "signal": how}
        return {"state": FRESH if mf.reason is None else STALE, "reason": mf.reason,
                "since": mf.since, "updated": mf.updated, "signal": how}

    def forget(self, models: Iterable[ModelKey]) -> None:
        """Forget models the engine forgot."""
        for mk in models:
            self.models.pop(mk, None)
