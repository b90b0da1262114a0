"""Attribution of a burn inside the envelope: the model's fault, its neighbour's, or its GPU's.

The judge (:mod:`.states`) calls a burn inside the concurrency envelope a ``regression``
(page the owner). With a placement (which models share which GPU: the sidecar's
``placement:``, :class:`~fleetwatch.labels.placement.Placement`) an
:class:`Attributor` looks closer at each regression of a placed model A, after every
judgement:

1. **gpu_degraded** — a GPU A runs on had a slowing clocks-event reason or a new XID error
   (:mod:`fleetwatch.slo.judge.gpu_health`) within the last long window ``L`` of the catalog's
   fastest window pair: the GPU is blamed, not A nor its neighbours.
2. **interference** — a co-located model B (:meth:`Placement.neighbours`) whose load rose:
   B's mean concurrency *during* the burn (over ``[onset − S, now]``, ``onset`` = the
   first judgement that saw A's regression — kept until A has not burned for ``L``, so a
   judgement or two without burn does not restart it —, ``S`` the pair's short window) is
   at least
   :data:`RISE_RATIO` × its mean *before* the burn (over ``[onset − L, onset − S)``) and at
   least
   :data:`MIN_RISE` requests more, and A's per-interval bad-event ratio in its bands inside
   the envelope correlates with B's concurrency (Pearson r ≥ :data:`MIN_CORRELATION` over
   the intervals from ``onset − L`` to ``onset + L``: the burn's beginning, where its
   cause shows; with fewer than :data:`MIN_PAIRS` intervals or a constant series r is not
   computed and not required). A burn that goes on while B stays busy keeps that
   evidence: computed over the burn's later intervals alone (once the samples before the
   onset aged out), r would miss the change that began it, and a burn of A's that barely
   moves with B's cycling load would go back to a page. A is in
   ``interference`` naming every such B (largest rise first): a ticket to the platform
   team, not a page.
3. Otherwise A stays ``regression``: a slower A with idle neighbours is A's own.

Load is concurrency (requests in the system, :mod:`fleetwatch.slo.account.concurrency`) summed over
B's versions; GPU utilization is not used: it cannot tell A's share from B's. The evidence
(:class:`~fleetwatch.slo.state.Attribution`: A's burn by band over the pair's windows,
each B's load before and during, r) is on the state, in ``/slo`` and in
``fleetwatch_slo_interference*``/``fleetwatch_slo_gpu_degraded`` (docs/interference.md).

The engine calls :meth:`Attributor.record` once per judgement and
:meth:`Attributor.attribute` right after the judge sets each state, before capacity is
learned (an attributed burn teaches nothing about A's capacity: ``judge.LEARNS_CAPACITY``).

Bounded: per placed model one load sample per judgement, kept ``2 L`` seconds — or back
to ``L`` before the onset of a burn still being judged, so that a burn longer than ``L``
keeps the intervals its correlation is computed on — and at most :data:`MAX_SAMPLES`;
per SLO and model the same for its inside-envelope event counts; state of forgotten
models is dropped at the next judgement.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.labels.placement import Placement
from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.judge.gpu_health import GPUHealth
from fleetwatch.slo.spec import SLOFile
from fleetwatch.slo.state import Attribution, ModelKey, Neighbour, SLOModelState

#: During the burn a neighbour's load must be at least this many times its load before…
RISE_RATIO = 1.5
#: … and at least this many requests more.
MIN_RISE = 0.5
#: The smallest Pearson r of A's bad ratio and B's load that counts as co-movement.
MIN_CORRELATION = 0.3
#: Intervals needed before r is computed (and required).
MIN_PAIRS = 4
#: Samples kept per model (and per SLO and model), whatever the horizon.
MAX_SAMPLES = 4096

INTERFERENCE = "interference"
GPU_DEGRADED = "gpu_degraded"

_Key = tuple[str, ModelKey]


class _Load(NamedTuple):
    """A model's summed concurrency (requests) over its placed replicas at ``t``."""

    t: float
    load: float


class _Inside(NamedTuple):
    """A state's cumulative ``total`` and ``good`` events inside its envelope at ``t``."""

    t: float
    total: float
    good: float


@dataclass(slots=True)
class _Onset:
    """A burn being judged: when it began (``since``, Unix seconds), each neighbour's
    mean load before it (None: unknown), and the ``last`` judgement that saw it."""

    since: float
    before: dict[str, float | None]
    last: float


def _mean(samples: deque[_Load], lo: float, hi: float) -> float | None:
    vals = [v for t, v in samples if lo <= t <= hi]
    return sum(vals) / len(vals) if vals else None


def _correlation(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < MIN_PAIRS:
        return None
    try:
        r = statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant series
        return None
    return r if math.isfinite(r) else None


class Attributor:
    """Turns regressions of placed models into ``interference`` or ``gpu_degraded``.

    ``placement``: which models share which GPU (empty: nothing is attributed, no state
    is kept). The window pair is the catalog's fastest (smallest long window)."""

    def __init__(self, slos: SLOFile, placement: Placement | None = None) -> None:
        self.placement = placement or Placement()
        fastest = min(slos.windows, key=lambda w: (w.long, w.short))
        self.long, self.short = float(fastest.long), float(fastest.short)
        self.gpus = GPUHealth(2 * self.long)
        self._load: dict[str, deque[_Load]] = {}
        self._inside: dict[_Key, deque[_Inside]] = {}
        #: (SLO, model) → its burn's onset
        self._onset: dict[_Key, _Onset] = {}

    def set_placement(self, placement: Placement) -> None:
        """Replace the placement (the sidecar's discovered placement overlaid on the
        declared one, whenever it changes). The loads of models no longer placed age out
        over two long windows; an empty placement keeps nothing. Called from another
        thread: one reference assignment (the engine reads ``placement`` once per use)."""
        self.placement = placement
        if not placement:
            self._load, self._inside, self._onset = {}, {}, {}

    def observe(self, snap: Snapshot) -> None:
        """Read the snapshot's GPU health (call for every snapshot, before judging)."""
        if self.placement:
            self.gpus.observe(snap)

    def record(self, ts: float, states: Mapping[_Key, SLOModelState],
               concurrency: Mapping[ModelKey, float]) -> None:
        """Start a judgement at ``ts``: record every placed model's load and drop what is
        older than the horizon (or of models no longer tracked). Then call
        :meth:`attribute` for each state the judge has just set."""
        if not self.placement:
            return
        self._expire(ts, states)
        self._record_loads(ts, concurrency)

    def attribute(self, ts: float, key: _Key, st: SLOModelState, ledger: Ledger) -> None:
        """Re-judge one judged state: a ``regression`` of a placed model may become
        ``interference`` or ``gpu_degraded`` (sets ``st.state`` and ``st.attribution``)."""
        if not self.placement or not self.placement.gpus_of(st.model.model):
            return
        self._record_inside(ts, key, st)
        if st.state != "regression":
            onset = self._onset.get(key)
            if onset is not None and ts - onset.last > self.long:
                del self._onset[key]  # a new burn after a long window is a new onset
            st.attribution = None
            return
        st.attribution = self._attribute(ts, key, st, ledger)
        if st.attribution is not None:
            st.state = st.attribution.kind

    def judge(self, ts: float, states: Mapping[_Key, SLOModelState],
              concurrency: Mapping[ModelKey, float], ledger: Ledger) -> None:
        """:meth:`record`, then :meth:`attribute` every state."""
        self.record(ts, states, concurrency)
        for key, st in states.items():
            self.attribute(ts, key, st, ledger)

    # -- evidence ---------------------------------------------------------------------
    def _record_loads(self, ts: float, concurrency: Mapping[ModelKey, float]) -> None:
        loads: dict[str, float] = {}
        for mk, c in concurrency.items():
            if self.placement.gpus_of(mk.model) and math.isfinite(c):
                loads[mk.model] = loads.get(mk.model, 0.0) + c
        for name, c in loads.items():
            q = self._load.setdefault(name, deque(maxlen=MAX_SAMPLES))
            if q and q[-1].t == ts:
                q.pop()
            q.append(_Load(ts, c))

    def _record_inside(self, ts: float, key: _Key, st: SLOModelState) -> None:
        env = st.slo.concurrency.envelope
        inside = [label for b, label in st.band_bounds() if b <= env]
        total = sum(st.events.get(b, 0.0) for b in inside)
        good = sum(st.good.get(b, 0.0) for b in inside)
        q = self._inside.setdefault(key, deque(maxlen=MAX_SAMPLES))
        if q and q[-1].t == ts:
            q.pop()
        q.append(_Inside(ts, total, good))

    def _bad_ratios(self, key: _Key, since: float, until: float) -> dict[float, float]:
        """Time → bad ratio of each interval with inside-envelope events ending in
        ``[since, until]``."""
        out: dict[float, float] = {}
        prev = None
        for now in self._inside.get(key, ()):
            if prev is not None and since <= now.t <= until and now.total > prev.total:
                dt, dg = now.total - prev.total, now.good - prev.good
                out[now.t] = min(max(1.0 - dg / dt, 0.0), 1.0)
            prev = now
        return out

    # -- the decision -----------------------------------------------------------------
    def _attribute(self, ts: float, key: _Key, st: SLOModelState,
                   ledger: Ledger) -> Attribution | None:
        model = st.model.model
        onset = self._onset.get(key)
        if onset is None:
            before = {}
            for b in self.placement.neighbours(model):
                q = self._load.get(b)
                before[b] = (_mean(q, ts - self.long, ts - self.short - 1e-9)
                             if q else None)
            onset = self._onset[key] = _Onset(ts, before, ts)
        onset.last = ts
        since, before_load = onset.since, onset.before
        env = st.slo.concurrency.envelope
        burn = {label: {w: ledger.burn_rate(st, label, w) for w in (self.long, self.short)}
                for b, label in st.band_bounds() if b <= env and label in st.burning_bands}
        gpus = {u: c for u in sorted(self.placement.gpus_of(model))
                if (c := self.gpus.conditions(u, ts - self.long))}
        if gpus:
            return Attribution(GPU_DEGRADED, since, self.long, self.short, burn, gpus=gpus)
        bad = self._bad_ratios(key, since - self.long, since + self.long)
        found: list[Neighbour] = []
        for b, base in sorted(before_load.items()):
            q = self._load.get(b)
            during = _mean(q, since - self.short, ts) if q else None
            if base is None or during is None:
                continue
            if during < RISE_RATIO * base or during - base < MIN_RISE:
                continue
            loads = dict(q) if q else {}
            pairs = [(r, loads[t]) for t, r in sorted(bad.items()) if t in loads]
            r = _correlation([bad_ratio for bad_ratio, _load in pairs],
                             [load for _bad, load in pairs])
            if r is not None and r < MIN_CORRELATION:
                continue
            found.append(Neighbour(b, base, during, r))
        if not found:
            return None
        found.sort(key=lambda n: (-(n.during - n.before), n.model))
        blamed = {n.model for n in found}
        shared = tuple(u for u in sorted(self.placement.gpus_of(model))
                       if any(m.model in blamed for m in self.placement.models_on(u)))
        return Attribution(INTERFERENCE, since, self.long, self.short, burn, neighbours=found,
                           devices=shared)

    def _expire(self, ts: float, states: Mapping[_Key, SLOModelState]) -> None:
        # two long windows, or back to a long window before the onset of a burn still
        # being judged: its correlation is over the intervals from onset − L to
        # onset + L, and a burn longer than L must not lose them
        horizon = min([ts - 2 * self.long]
                      + [o.since - self.long for k, o in self._onset.items() if k in states])
        for name in list(self._load):
            lq = self._load[name]
            while lq and lq[0].t < horizon:
                lq.popleft()
            if not lq:
                del self._load[name]
        for key in list(self._inside):
            iq = self._inside[key]
            while iq and iq[0].t < horizon:
                iq.popleft()
            if not iq or key not in states:
                del self._inside[key]
        for k in [k for k in self._onset if k not in states]:
            del self._onset[k]
