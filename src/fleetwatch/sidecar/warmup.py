"""Warm-up gating: ``/readyz`` stays not ready for a model whose registry entry says
``warmup: {gate: required, count: N, …}`` until its warm-up ran on this server instance,
and ``fleetwatch_model_warm{target, model, model_version}`` says so.

**How the sidecar learns that the warm-up ran**: from the server's own request counter,
not from a message. A model version is *warm* when the server reports at least
``warmup.count`` successful requests for it (``modelserver_requests_total{outcome=
"success"}``: Triton's ``nv_inference_request_success``, vLLM's
``request_success_total``). Those counters count since the server process (or the
model, on a Triton reload) started, so a restart resets them and the model is cold again
by construction — the same counter reset the SLO decoder handles (:mod:`fleetwatch.slo.
decode`); a reset seen between two scrapes is logged (``… restarted: not warm until its
warm-up ran again``). Why not a POST from ``fleetwatch warmup`` to the sidecar: the state
would live in the sidecar, so a sidecar restart would make a warm server look cold (or a
server restart between the POST and the next scrape would leave a cold one looking warm),
and any warm-up tool that is not ``fleetwatch warmup`` could not open the gate. Counting
needs nothing but the scrape the sidecar does anyway; while the gate is closed no routed
traffic reaches the server (its pod is not ready), so the requests counted are the
warm-up's (or probes sent on purpose).

Bounded: one entry per (target, model, version) with a warm-up spec in the last
snapshot; entries of models gone from a target's exposition are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from fleetwatch.exporters.normalize import Normalized, value_of
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.labels.registry import Registry
from fleetwatch.labels.schema import METRICS, METRICS_BY_NAME

log = logging.getLogger("fleetwatch.warmup")

REQUESTS = "modelserver_requests_total"
WARM = "fleetwatch_model_warm"
_REQUESTS_INDEX = next(i for i, m in enumerate(METRICS) if m.name == REQUESTS)
#: (target, model, model_version)
Key = tuple[str, str, str]


def successes(n: Normalized) -> dict[tuple[str, str], float]:
    """Successful requests per ``(model, model_version)`` in one normalized exposition
    (summed over the other labels)."""
    out: dict[tuple[str, str], float] = {}
    for prefix, v in n.families[_REQUESTS_INDEX].items():
        _, labels = n.key(prefix)
        lab = dict(labels)
        if lab.get("outcome") != "success":
            continue
        mv = (lab.get("model", ""), lab.get("model_version", ""))
        out[mv] = out.get(mv, 0.0) + value_of(v)
    return out


class WarmupGate:
    """Which model versions with a registry warm-up spec ran it (see the module doc).
    Subscribe :meth:`observe` to the scraper's snapshots."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        #: (target, model, version) → successful requests since the server started
        self.counts: dict[Key, float] = {}
        #: (target, model, version) → warm (count reached)
        self.warm: dict[Key, bool] = {}

    @staticmethod
    def wanted(registry: Registry) -> bool:
        """Whether any registry entry has a warm-up spec (else no gate is needed)."""
        return any(e.warmup is not None for e in registry.entries)

    def observe(self, snap: Snapshot) -> None:
        """Read every live target's success counters (a target down keeps nothing: it is
        not ready anyway, and its counters are read afresh when it answers again)."""
        counts: dict[Key, float] = {}
        for target, n in snap.targets.items():
            if n is None:
                continue
            for (model, version), value in successes(n).items():
                entry = self.registry.lookup(model, version)
                if entry is not None and entry.warmup is not None:
                    counts[(target, model, version)] = value
        warm: dict[Key, bool] = {}
        for key, value in counts.items():
            entry = self.registry.lookup(key[1], key[2])
            assert entry is not None and entry.warmup is not None
            before = self.counts.get(key)
            if before is not None and value < before:
                log.info("target %s: model %s (version %r): request counter reset (server "
                         "restarted): not warm until its warm-up ran again", *key)
            warm[key] = value >= entry.warmup.count
            if warm[key] and not self.warm.get(key, False):
                log.info("target %s: model %s (version %r) warm: %d successful requests "
                         "since the server started (warmup.count %d)", *key, int(value),
                         entry.warmup.count)
        self.counts, self.warm = counts, warm

    def not_warm(self, target: str, models: list[str]) -> list[str]:
        """Models of ``target`` (``models``: the ones its readiness probes answer for,
        plus those with a counter seen) whose warm-up is required and has not run: a
        version seen not warm, or no request counter seen at all yet."""
        out = []
        names = {m for m in models if not m.startswith("(")}  # not vLLM's "(engine)"
        names.update(k[1] for k in self.warm if k[0] == target)
        for model in sorted(names):
            versions = [k for k in self.warm if k[0] == target and k[1] == model]
            entry = self.registry.lookup(model, versions[0][2] if versions else "")
            if versions:
                cold = [k for k in versions if not self.warm[k]
                        and self._required(k[1], k[2])]
                if cold:
                    out.append(model)
            elif entry is not None and entry.warmup is not None and entry.warmup.required:
                out.append(model)
        return sorted(out)

    def _required(self, model: str, version: str) -> bool:
        entry = self.registry.lookup(model, version)
        return entry is not None and entry.warmup is not None and entry.warmup.required

    def collect(self) -> Iterator[Metric]:
        """``fleetwatch_model_warm`` (one gauge family)."""
        mdef = METRICS_BY_NAME[WARM]
        fam = GaugeMetricFamily(WARM, mdef.help, labels=list(mdef.labels))
        for key, ok in sorted(self.warm.items()):
            fam.add_metric(list(key), 1.0 if ok else 0.0)
        yield fam
