"""The SLO engine: concurrency-conditioned events, burn rates, state, capacity, signals.

Fed every sidecar snapshot (normalized, timestamped), per SLO and model it:

1. **accounts events** of the interval: Δgood and Δtotal (latency: histogram bucket
   ``le = threshold`` vs ``_count``; availability: successful vs all requests; time
   slice: one event, good when the interval's quantile or mean ≤ threshold). Deltas are
   taken per upstream series, so a counter reset never yields negative or lost events
   (after a reset the new value is the delta);
2. **attributes** them to the **concurrency band** of the interval: the average of the
   running-requests gauge at both ends (vLLM, TensorRT-LLM), else Little's law,
   Δ(sum of request durations) / Δt (Triton);
3. keeps **burn rates** (error rate ÷ error budget, SRE Workbook) over every window of
   the catalog, per band and overall, in bounded memory (:class:`RollingWindows`), and
   the **error budget remaining** over the SLO period;
4. **classifies**: ``regression`` when a band inside the concurrency envelope burns
   faster than a window pair's threshold on both its windows, ``overload`` when only
   bands above the envelope do, ``ok`` otherwise (``no_data`` before any event,
   ``misconfigured`` when the threshold is not a bucket boundary of the source);
5. learns **capacity at SLO**: the highest band whose burn rate over the capacity window
   stays below 1 with enough events to trust it, walking up from the lowest band and
   stopping at the first trusted band that burns (the envelope until a band is trusted),
   adopted only after it held for ``hysteresis_updates`` updates;
6. derives **autoscaling signals** per model: ``concurrency / capacity``, mean queue wait
   ÷ target, KV-cache usage ÷ target, GPU-memory usage ÷ target; the signal is the
   largest. With an HPA/KEDA ``AverageValue`` target of 1, desired replicas =
   ceil(Σ signal over replicas).
"""

from __future__ import annotations

import fnmatch
import math
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from fleetwatch.exporters.mapping import Normalized
from fleetwatch.exporters.snapshot import SeriesKey, Snapshot
from fleetwatch.labels.registry import Registry
from fleetwatch.labels.schema import METRICS
from fleetwatch.slo.bands import band_label, band_of, budget_remaining
from fleetwatch.slo.spec import (
    LATENCY_METRICS,
    SUMMARY_METRICS,
    SLOFile,
    SLOSpec,
    format_duration,
)
from fleetwatch.slo.windows import RollingWindows

ModelKey = tuple[str, str, str]  # (model, model_version, backend)
STATES = ("ok", "regression", "overload", "no_data", "misconfigured")
ALL = "all"

_REQUESTS = "modelserver_requests_total"
_ACTIVE = "modelserver_requests_active"
_DURATION = "modelserver_request_duration_seconds"
_QUEUE = "modelserver_queue_duration_seconds"
_KV = "modelserver_kv_cache_usage_ratio"
_GPU_USED = "modelserver_gpu_memory_used_bytes"
_GPU_TOTAL = "modelserver_gpu_memory_total_bytes"


# How a normalized series feeds an interval (codes ≥ _R_COUNTERS are cumulative).
_R_SKIP, _R_RUNNING, _R_KV, _R_QUANTILE, _R_GPU_USED, _R_GPU_TOTAL = range(6)
_R_COUNTERS = 10
_R_BUCKET, _R_COUNT, _R_SUM, _R_REQ_GOOD, _R_REQ_BAD, _R_SUMMARY_COUNT = range(10, 16)


@dataclass
class _Hist:
    """Deltas of one histogram of one model over one interval."""

    count: float = 0.0
    sum: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)


@dataclass
class _Interval:
    """What one model did during one interval (deltas) and its gauges at the end."""

    hists: dict[str, _Hist] = field(default_factory=lambda: defaultdict(_Hist))
    good_requests: float = 0.0
    total_requests: float = 0.0
    running_now: float | None = None
    summaries: dict[tuple[str, str], float] = field(default_factory=dict)
    kv_usage: float | None = None


@dataclass
class SLOModelState:
    """Everything the engine knows about one SLO on one model."""

    slo: SLOSpec
    model: ModelKey
    state: str = "no_data"
    error: str | None = None
    capacity: float = 0.0
    pending_capacity: float | None = None
    pending_count: int = 0
    burning_bands: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)  # band → row of the window store
    bands: list[tuple[float, str]] = field(default_factory=list)
    events: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    good: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    last_band: str | None = None


class SLOEngine:
    """Runs the SLOs of an :class:`SLOFile` over successive snapshots.

    ``CARRY_SECONDS``: how long a series' last value is kept when its target is down, so
    that the events of the gap are counted (over the longer interval) when it returns.

    Subscribe :meth:`update` to the scraper; read :meth:`status` and :meth:`autoscaling`
    (JSON-ready), or expose :meth:`iter_metrics` through
    :class:`fleetwatch.slo.export.SLOCollector`.
    """

    CARRY_SECONDS = 3600.0

    def __init__(self, slos: SLOFile, registry: Registry | None = None,
                 buckets: int = 60) -> None:
        self.spec = slos
        self.registry = registry or Registry()
        self.window_lengths = sorted(set(slos.all_windows())
                                     | {s.period_seconds for s in slos.slos})
        self.windows = RollingWindows(self.window_lengths, buckets)
        self.states: dict[tuple[str, ModelKey], SLOModelState] = {}
        self.concurrency: dict[ModelKey, float] = {}
        self.queue_wait: dict[ModelKey, float] = {}
        self.kv_usage: dict[ModelKey, float] = {}
        self.gpu_memory_ratio: float | None = None
        self.last_update: float | None = None
        self.update_seconds = 0.0
        self._prev_ts: float | None = None
        # series prefix → (last cumulative value, when seen): kept across a scrape gap (a
        # target down) for CARRY_SECONDS, so the gap's events are counted when it returns
        self._prev: dict[str, tuple[float, float]] = {}
        self._model_seen: dict[ModelKey, float] = {}  # when each model last had data
        self._prev_running: dict[ModelKey, float] = {}
        self._readers: dict[str, tuple] = {}
        self._row_objective: list[float] = []
        self._row_period: list[float] = []
        self._burn = np.zeros((0, len(self.window_lengths)))
        self._burning = np.zeros(0, dtype=bool)
        self._bounds: dict[tuple[str, ModelKey], set[float]] = defaultdict(set)
        self._families = self._needed_families()
        self._selected: dict[tuple[str, ModelKey], bool] = {}

    # -- input ----------------------------------------------------------------------
    def _needed_families(self) -> list[int]:
        names = {_REQUESTS, _ACTIVE, _DURATION, _QUEUE, _KV, _GPU_USED, _GPU_TOTAL}
        for s in self.spec.slos:
            if s.sli.latency:
                names.add(LATENCY_METRICS[s.sli.latency.metric])
            if s.sli.timeslice:
                names.add(LATENCY_METRICS[s.sli.timeslice.metric])
                if s.sli.timeslice.quantile is not None:
                    names.add(SUMMARY_METRICS[s.sli.timeslice.metric])
        return [i for i, m in enumerate(METRICS) if m.name in names]

    def update(self, snap: Snapshot) -> None:
        """Account one snapshot (call for every scrape, in order)."""
        t0 = time.perf_counter()
        ts = snap.timestamp
        if self._prev_ts is not None and ts <= self._prev_ts:
            return
        intervals: dict[ModelKey, _Interval] = defaultdict(_Interval)
        seen: dict[str, tuple[float, float]] = {}
        gpu_used = gpu_total = 0.0
        for normalized in snap.targets.values():
            if normalized is None:
                continue
            u, tot = self._read(normalized, intervals, seen, ts)
            gpu_used, gpu_total = gpu_used + u, gpu_total + tot
        self.gpu_memory_ratio = gpu_used / gpu_total if gpu_total > 0 else None
        prev_ts = self._prev_ts
        for prefix, (value, when) in self._prev.items():
            if prefix not in seen and ts - when <= self.CARRY_SECONDS:
                seen[prefix] = (value, when)
        self._prev = seen
        self._prev_ts = ts
        if prev_ts is not None:
            self._account(ts, prev_ts, intervals)
        for mk in intervals:
            self._model_seen[mk] = ts
        for mk, iv in intervals.items():
            if iv.running_now is not None:
                self._prev_running[mk] = iv.running_now
        self.last_update = ts
        self.update_seconds = time.perf_counter() - t0

    def _reader(self, fam_name: str, key: SeriesKey) -> tuple:
        """Compile how a normalized series feeds the interval (once per series)."""
        name, labels = key
        labels = dict(labels)
        if fam_name == _GPU_USED:
            return (_R_GPU_USED, None, None)
        if fam_name == _GPU_TOTAL:
            return (_R_GPU_TOTAL, None, None)
        if "model" not in labels:
            return (_R_SKIP, None, None)
        mk = (labels["model"], labels.get("model_version", ""), labels["backend"])
        if fam_name == _REQUESTS:
            return (_R_REQ_GOOD if labels.get("outcome") == "success" else _R_REQ_BAD, mk, None)
        if fam_name == _ACTIVE:
            return (_R_RUNNING if labels.get("state") == "running" else _R_SKIP, mk, None)
        if fam_name == _KV:
            return (_R_KV, mk, None)
        if name.endswith("_bucket"):
            le = float(labels["le"])
            self._bounds[(fam_name, mk)].add(le)
            return (_R_BUCKET, mk, (fam_name, le))
        if name.endswith("_sum"):
            return (_R_SUM if not fam_name.endswith("_summary_seconds") else _R_SKIP, mk,
                    fam_name)
        if name.endswith("_count"):
            summary = fam_name.endswith("_summary_seconds")
            return (_R_SUMMARY_COUNT if summary else _R_COUNT, mk, fam_name)
        if "quantile" in labels:
            return (_R_QUANTILE, mk, (fam_name, labels["quantile"]))
        return (_R_SKIP, None, None)

    def _read(self, n: Normalized, intervals: dict[ModelKey, _Interval],
              seen: dict[str, tuple[float, float]], ts: float) -> tuple[float, float]:
        gpu_used = gpu_total = 0.0
        readers = self._readers
        prev = self._prev
        for idx in self._families:
            fam_name = METRICS[idx].name
            for prefix, raw in n.families[idx].items():
                r = readers.get(prefix)
                if r is None:
                    if len(readers) > 500_000:
                        readers.clear()
                    r = readers[prefix] = self._reader(fam_name, n.key(prefix))
                code, mk, arg = r
                if code == _R_SKIP:
                    continue
                value = raw if raw.__class__ is float else float(raw)
                if code >= _R_COUNTERS:  # cumulative: take the reset-aware delta
                    seen[prefix] = (value, ts)
                    before = prev.get(prefix)
                    d = 0.0 if before is None else (
                        value - before[0] if value >= before[0] else value)
                    iv = intervals[mk]
                    if code == _R_BUCKET:
                        h = iv.hists[arg[0]]
                        h.buckets[arg[1]] = h.buckets.get(arg[1], 0.0) + d
                    elif code == _R_COUNT:
                        iv.hists[arg].count += d
                    elif code == _R_SUM:
                        iv.hists[arg].sum += d
                    elif code == _R_REQ_GOOD:
                        iv.total_requests += d
                        iv.good_requests += d
                    elif code == _R_REQ_BAD:
                        iv.total_requests += d
                    else:  # _R_SUMMARY_COUNT
                        key = (arg, "_count_delta")
                        iv.summaries[key] = iv.summaries.get(key, 0.0) + d
                elif code == _R_RUNNING:
                    iv = intervals[mk]
                    iv.running_now = (iv.running_now or 0.0) + value
                elif code == _R_KV:
                    iv = intervals[mk]
                    iv.kv_usage = max(iv.kv_usage or 0.0, value)
                elif code == _R_QUANTILE:
                    intervals[mk].summaries[arg] = value
                elif code == _R_GPU_USED:
                    gpu_used += value
                elif code == _R_GPU_TOTAL:
                    gpu_total += value
        return gpu_used, gpu_total

    # -- accounting -----------------------------------------------------------------
    def _selects(self, slo: SLOSpec, mk: ModelKey) -> bool:
        key = (slo.name, mk)
        hit = self._selected.get(key)
        if hit is None:
            sel = slo.selector
            entry = self.registry.lookup(mk[0], mk[1])
            hit = ((not sel.models or any(fnmatch.fnmatchcase(mk[0], g) for g in sel.models))
                   and (not sel.teams or (entry is not None and entry.team in sel.teams))
                   and (not sel.latency_tiers
                        or (entry is not None and entry.latency_tier in sel.latency_tiers)))
            self._selected[key] = hit
        return hit

    def _concurrency(self, mk: ModelKey, iv: _Interval, dt: float) -> float | None:
        if iv.running_now is not None:
            prev = self._prev_running.get(mk, iv.running_now)
            return (prev + iv.running_now) / 2.0
        h = iv.hists.get(_DURATION)
        if h is not None:
            return h.sum / dt  # Little's law: L = Σ durations / Δt
        return None

    def _events(self, st: SLOModelState, iv: _Interval) -> tuple[float, float] | None:
        sli = st.slo.sli
        if sli.availability:
            return iv.good_requests, iv.total_requests
        if sli.latency:
            fam = LATENCY_METRICS[sli.latency.metric]
            h = iv.hists.get(fam)
            if h is None:
                return None
            bounds = self._bounds.get((fam, st.model), set())
            thr = sli.latency.threshold_seconds
            match = next((b for b in bounds if math.isclose(b, thr, rel_tol=1e-9)), None)
            if match is None:
                finite = sorted(b for b in bounds if not math.isinf(b))
                below = [b for b in finite if b < thr][-2:]
                above = [b for b in finite if b > thr][:2]
                near = ", ".join(format(b, "g") for b in below + above) or "none (no buckets)"
                st.error = (f"threshold {thr:g} s is not a bucket boundary of {fam} for model "
                            f"{st.model[0]}; nearest boundaries: {near}")
                return None
            st.error = None
            return h.buckets.get(match, 0.0), h.count
        ts = sli.timeslice
        assert ts is not None
        fam = LATENCY_METRICS[ts.metric]
        if ts.quantile is None:
            h = iv.hists.get(fam)
            if h is None or h.count <= 0:
                return None
            return (1.0 if h.sum / h.count <= ts.threshold_seconds else 0.0), 1.0
        sfam = SUMMARY_METRICS[ts.metric]
        q = iv.summaries.get((sfam, ts.quantile))
        if q is None or iv.summaries.get((sfam, "_count_delta"), 0.0) <= 0 or q != q:
            return None
        return (1.0 if q <= ts.threshold_seconds else 0.0), 1.0

    def _account(self, ts: float, prev_ts: float,
                 intervals: dict[ModelKey, _Interval]) -> None:
        rows, goods, totals = [], [], []
        for mk, iv in intervals.items():
            # the model's own interval: since it last had data (a target down stretches it)
            dt = ts - self._model_seen.get(mk, prev_ts)
            if dt <= 0:
                continue
            conc = self._concurrency(mk, iv, dt)
            if conc is not None:
                self.concurrency[mk] = conc
            q = iv.hists.get(_QUEUE)
            if q is not None and q.count > 0:
                self.queue_wait[mk] = q.sum / q.count
            if iv.kv_usage is not None:
                self.kv_usage[mk] = iv.kv_usage
            for slo in self.spec.slos:
                if not self._selects(slo, mk):
                    continue
                st = self.states.get((slo.name, mk))
                if st is None:
                    st = self.states[(slo.name, mk)] = SLOModelState(
                        slo, mk, capacity=slo.concurrency.envelope)
                ev = self._events(st, iv)
                if ev is None or conc is None:
                    continue
                good, total = ev
                if total <= 0:
                    continue
                good = min(good, total)
                band = band_label(band_of(conc, slo.concurrency.bands))
                st.last_band = band
                for b in (band, ALL):
                    st.events[b] += total
                    st.good[b] += good
                    rows.append(self._row(st, b))
                    goods.append(good)
                    totals.append(total)
        self.windows.add(ts, np.asarray(rows, dtype=np.int64), np.asarray(goods, dtype=float),
                         np.asarray(totals, dtype=float))
        self._compute_burn()
        burning = self._burning.tolist()
        cap_i = self.windows.index[float(self.spec.capacity.window)]
        cap_total = self.windows.sums()[:, cap_i, 1].tolist()
        cap_burn = self._burn[:, cap_i].tolist()
        for st in self.states.values():
            self._judge(st, burning, cap_total, cap_burn)

    def _row(self, st: SLOModelState, band: str) -> int:
        r = st.rows.get(band)
        if r is None:
            r = st.rows[band] = self.windows.row((st.slo.name, st.model, band))
            if r == len(self._row_objective):
                self._row_objective.append(st.slo.objective)
                self._row_period.append(st.slo.period_seconds)
        return r

    def _compute_burn(self) -> None:
        """Burn rates of every row and window, and which rows burn on a window pair
        (vectorized: one pass for all SLOs, models and bands)."""
        sums = self.windows.sums()
        n = sums.shape[0]
        objective = np.asarray(self._row_objective[:n])
        period = np.asarray(self._row_period[:n])
        with np.errstate(divide="ignore", invalid="ignore"):
            self._burn = (1.0 - sums[:, :, 0] / sums[:, :, 1]) / (1.0 - objective)[:, None]
        burning = np.zeros(n, dtype=bool)
        for w in self.spec.windows:
            factor = w.budget_consumed * period / w.long
            li, si = self.windows.index[float(w.long)], self.windows.index[float(w.short)]
            burning |= (self._burn[:, li] > factor) & (self._burn[:, si] > factor)
        self._burning = burning

    # -- judgement ------------------------------------------------------------------
    def window_sums(self, st: SLOModelState, band: str, window: float,
                    sums: np.ndarray | None = None) -> tuple[float, float]:
        """(good, total) of a band (or ``"all"``) over a window length (seconds)."""
        row = self.windows.rows.get((st.slo.name, st.model, band))
        if row is None:
            return 0.0, 0.0
        s = self.windows.sums() if sums is None else sums
        g, t = s[row, self.windows.index[float(window)]]
        return float(g), float(t)

    def burn(self, st: SLOModelState, band: str, window: float,
             sums: np.ndarray | None = None) -> float:
        """Burn rate of a band (or ``"all"``) over a window length, as of the last update."""
        row = st.rows.get(band)
        if row is None or row >= self._burn.shape[0]:
            return math.nan
        return float(self._burn[row, self.windows.index[float(window)]])

    @staticmethod
    def _bands(st: SLOModelState) -> list[tuple[float, str]]:
        if not st.bands:
            st.bands = [(b, band_label(b)) for b in [*st.slo.concurrency.bands, math.inf]]
        return st.bands

    def _judge(self, st: SLOModelState, burning_rows: list[bool], cap_total: list[float],
               cap_burn: list[float]) -> None:
        slo = st.slo
        if st.error is not None:
            st.state = "misconfigured"
            return
        if not st.events:
            st.state = "no_data"
            return
        bands = self._bands(st)
        burning = [(b, label) for b, label in bands
                   if label in st.rows and burning_rows[st.rows[label]]]
        st.burning_bands = [label for _, label in burning]
        envelope = slo.concurrency.envelope
        if any(b <= envelope for b, _ in burning):
            st.state = "regression"
        elif burning:
            st.state = "overload"
        else:
            st.state = "ok"
        # capacity at SLO: walk up the bands; untrusted bands (too few events) are skipped,
        # the first trusted band that burns stops the walk. No trusted band yet: the
        # envelope. Only the lowest trusted band burns: keep the last estimate (that is a
        # regression, not a capacity).
        cap_cfg = self.spec.capacity
        estimate: float | None = None
        trusted_any = False
        for b, label in bands:
            row = st.rows.get(label)
            if math.isinf(b) or row is None:
                continue
            if cap_total[row] < cap_cfg.min_events:
                continue
            trusted_any = True
            if cap_burn[row] < 1.0:
                estimate = b
            else:
                break
        if estimate is None:
            estimate = st.capacity if trusted_any else envelope
        if estimate == st.capacity:
            st.pending_capacity, st.pending_count = None, 0
        elif estimate == st.pending_capacity:
            st.pending_count += 1
            if st.pending_count >= cap_cfg.hysteresis_updates:
                st.capacity, st.pending_capacity, st.pending_count = estimate, None, 0
        else:
            st.pending_capacity, st.pending_count = estimate, 1
            if cap_cfg.hysteresis_updates <= 1:
                st.capacity, st.pending_capacity, st.pending_count = estimate, None, 0

    # -- outputs --------------------------------------------------------------------
    def model_capacity(self, mk: ModelKey) -> float | None:
        """Capacity at SLO of a model: the smallest over its SLOs (None without SLOs)."""
        caps = [st.capacity for (_, m), st in self.states.items() if m == mk]
        return min(caps) if caps else None

    def model_state(self, mk: ModelKey) -> str:
        """Worst state over the model's SLOs (regression > overload > misconfigured > …)."""
        order = ("regression", "overload", "misconfigured", "ok", "no_data")
        states = {st.state for (_, m), st in self.states.items() if m == mk}
        return next((s for s in order if s in states), "no_data")

    def autoscaling(self) -> list[dict]:
        """One object per model (KEDA metrics-api shape): ``signal`` (the largest
        component), ``components`` (ratios: concurrency/capacity, queue wait/target,
        KV-cache usage/target, GPU-memory usage/target), ``capacity``, ``concurrency``,
        ``state``."""
        targets = self.spec.autoscaling
        models = set(self.concurrency) | set(self.kv_usage) | {m for _, m in self.states}
        out = []
        for mk in sorted(models):
            comps: dict[str, float] = {}
            cap = self.model_capacity(mk)
            conc = self.concurrency.get(mk)
            if cap and conc is not None:
                comps["concurrency"] = conc / cap
            if mk in self.queue_wait:
                comps["queue_wait"] = self.queue_wait[mk] / targets.queue_wait_seconds
            if mk in self.kv_usage:
                comps["kv_cache"] = self.kv_usage[mk] / targets.kv_cache_usage_ratio
            if self.gpu_memory_ratio is not None:
                comps["gpu_memory"] = self.gpu_memory_ratio / targets.gpu_memory_usage_ratio
            out.append({
                "model": mk[0], "model_version": mk[1], "backend": mk[2],
                "signal": max(comps.values()) if comps else 0.0,
                "components": comps, "capacity": cap, "concurrency": conc,
                "state": self.model_state(mk),
            })
        return out

    def status(self) -> list[dict]:
        """Per SLO and model: state, budget remaining, burn rates by window and band,
        capacity, the explanation of the state (JSON-ready)."""
        out = []
        sums = self.windows.sums()
        for (name, mk), st in sorted(self.states.items()):
            slo = st.slo
            bands = [label for _, label in self._bands(st)] + [ALL]
            burn = {format_duration(w): {b: _num(self.burn(st, b, w, sums)) for b in bands}
                    for w in self.window_lengths}
            g, t = self.window_sums(st, ALL, slo.period_seconds, sums)
            out.append({
                "slo": name, "model": mk[0], "model_version": mk[1], "backend": mk[2],
                "objective": slo.objective, "sli": slo.sli.kind,
                "state": st.state, "explanation": self.explain(st),
                "error_budget_remaining": budget_remaining(g, t, slo.objective),
                "capacity": st.capacity, "envelope": slo.concurrency.envelope,
                "concurrency": self.concurrency.get(mk), "burn_rates": burn,
                "events": dict(st.events),
            })
        return out

    def explain(self, st: SLOModelState) -> str:
        """A sentence saying why the state is what it is."""
        env = format(st.slo.concurrency.envelope, "g")
        if st.state == "misconfigured":
            return st.error or "misconfigured"
        if st.state == "no_data":
            return "no events yet"
        if st.state == "regression":
            return (f"budget burning in bands {', '.join(st.burning_bands)} — inside the "
                    f"envelope (≤ {env} concurrent requests per replica): page the owner")
        if st.state == "overload":
            return (f"budget burning only in bands {', '.join(st.burning_bands)}, above the "
                    f"envelope (≤ {env}): scale out, do not page")
        return "no window pair burns faster than its threshold"

    def iter_metrics(self) -> Iterator[tuple[str, dict[str, str], float]]:
        """``(family, labels, value)`` for every exported series (see :mod:`.export`)."""
        sums = self.windows.sums()
        for (name, mk), st in sorted(self.states.items()):
            base = {"slo": name, "model": mk[0], "model_version": mk[1], "backend": mk[2]}
            for band in sorted(st.events, key=_band_sort):
                lab = {**base, "band": band}
                yield "fleetwatch_slo_events_total", lab, st.events[band]
                yield "fleetwatch_slo_good_events_total", lab, st.good[band]
                for w in self.window_lengths:
                    yield ("fleetwatch_slo_burn_rate",
                           {**lab, "window": format_duration(w)}, self.burn(st, band, w, sums))
            g, t = self.window_sums(st, ALL, st.slo.period_seconds, sums)
            yield ("fleetwatch_slo_error_budget_remaining_ratio", base,
                   budget_remaining(g, t, st.slo.objective))
            yield "fleetwatch_slo_capacity_concurrency", base, st.capacity
            for s in STATES:
                yield "fleetwatch_slo_state", {**base, "state": s}, 1.0 if st.state == s else 0.0
        for obj in self.autoscaling():
            base = {"model": obj["model"], "model_version": obj["model_version"],
                    "backend": obj["backend"]}
            if obj["concurrency"] is not None:
                yield "fleetwatch_slo_concurrency", base, obj["concurrency"]
            yield "fleetwatch_autoscaling_signal_ratio", base, obj["signal"]
            for comp, v in sorted(obj["components"].items()):
                yield "fleetwatch_autoscaling_component_ratio", {**base, "component": comp}, v


def _num(v: float) -> float | None:
    return None if v != v else v


def _band_sort(label: str) -> tuple[int, float]:
    if label == ALL:
        return (2, 0.0)
    return (0 if label != "+Inf" else 1, float(label) if label != "+Inf" else 0.0)
