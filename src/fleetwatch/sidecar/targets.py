"""What the sidecar knows about each upstream target, and the per-model facts read off its
normalized state (read by ``/metrics``, ``/readyz``, the self-metrics and the engine)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from fleetwatch.exporters.entry import FAMILY_INDEX
from fleetwatch.exporters.normalize import Normalized, Normalizer, value_of
from fleetwatch.exporters.source import Source
from fleetwatch.exporters.sources import SOURCES_BY_KIND
from fleetwatch.sidecar.config import Target


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
    errors: Counter[str] = field(default_factory=Counter)
    invalid_lines_total: int = 0
    invalid_samples: Counter[str] = field(default_factory=Counter)  # reason → refused
    refused_signature: tuple[str, ...] = ()  # reasons refused in the last scrape (logged)
    unmapped_logged: frozenset[str] = frozenset()  # unmapped families named in the log
    normalized: Normalized | None = None
    runtimes: dict[str, str] = field(default_factory=dict)
    models_ready: dict[str, bool] = field(default_factory=dict)
    invalid_signature: tuple[int, tuple[str, ...]] | None = None
    scrapes_ok: int = 0
    last_seen: dict[str, int] = field(default_factory=dict)  # model → scrapes_ok when seen
    exposed_unknown: set[str] = field(default_factory=set)  # exposed before runtime known
    unreadable_config: set[str] = field(default_factory=set)  # logged once per model
    #: What the server reports about itself (engine_version, …): None until it answered;
    #: forgotten when the target goes down (it may come back upgraded).
    identity: dict[str, str] | None = None
    models_sleeping: set[str] = field(default_factory=set)  # engine asleep: not ready
    runtime_asked: set[str] = field(default_factory=set)  # runtime asked (maybe no answer)
    deferring: bool = True  # the normalizer may leave out models whose runtime is coming
    probed_at: dict[str, float] = field(default_factory=dict)  # readiness asked (monotonic)

    @property
    def source(self) -> Source | None:
        """The source the target is read as (``None`` before the first scrape or when
        detection found none)."""
        return SOURCES_BY_KIND.get(self.kind or "")

    def defer_runtime(self, model: str) -> bool:
        """Whether a model's series wait for its runtime (never asked yet; see
        ``TargetContext.defer``)."""
        return self.deferring and model not in self.runtimes \
            and model not in self.runtime_asked

    def runtime_for(self, model: str) -> str:
        return self.runtimes.get(model) or self.target.runtime or "unknown"

    def forget_unseen_models(self, after_scrapes: int) -> None:
        """Drop the per-model facts (runtime, readiness, probe times) of models not
        observed in the last ``after_scrapes`` successful scrapes; the target's listed
        ``models`` keep their readiness."""
        oldest = self.scrapes_ok - after_scrapes
        gone = [m for m, seen in self.last_seen.items() if seen <= oldest]
        keep_ready = set(self.target.models)
        for m in gone:
            del self.last_seen[m]
            self.runtimes.pop(m, None)
            self.runtime_asked.discard(m)
            self.probed_at.pop(m, None)
            self.exposed_unknown.discard(m)
            self.unreadable_config.discard(m)
            if m not in keep_ready:
                self.models_ready.pop(m, None)

    @property
    def ready(self) -> bool:
        return self.up and all(self.models_ready.values())


_SLEEP_STATE = FAMILY_INDEX["modelserver_engine_sleep_state"]


def sleeping_models(n: Normalized | None) -> set[str]:
    """Models whose engine reports itself asleep (``modelserver_engine_sleep_state``
    ``{sleep_state="awake"}`` 0, vLLM 0.11.2+ sleep mode)."""
    if n is None:
        return set()
    out = set()
    for prefix, v in n.families[_SLEEP_STATE].items():
        labels = dict(n.key(prefix)[1])
        if labels.get("sleep_state") == "awake" and value_of(v) == 0 and "model" in labels:
            out.add(labels["model"])
    return out


def readiness_due(st: TargetState, observed: list[str], interval: float, every: float,
                  now: float) -> list[str]:
    """The models found in the exposition whose readiness to ask in this scrape: the ones
    not asked yet or not ready (every scrape: a loading LLM's cold start is measured to
    the scrape), and of the ready ones those asked longest ago, once ``every`` seconds
    (``scrape.readiness_every``) have passed, at most the share that spreads them evenly
    over that cadence (no burst of requests every so often). ``now``: monotonic seconds,
    the clock of ``st.probed_at``."""
    due = [m for m in observed if st.models_ready.get(m) is not True]
    ready = sorted((st.probed_at.get(m, -math.inf), m) for m in observed
                   if st.models_ready.get(m) is True)
    share = max(1, math.ceil(len(ready) * interval / every))
    due += [m for at, m in ready[:share] if now - at >= every]
    return due
