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

from fleetwatch.exporters.mapping import Normalized, value_of
from fleetwatch.exporters.parser import split_key
from fleetwatch.exporters.scraper import Snapshot
from fleetwatch.labels.registry import Registry
from fleetwatch.labels.schema import METRICS
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


def band_label(bound: float) -> str:
    """``4.0`` → ``"4"``; bands are upper bounds of per-replica concurrency."""
    return "+Inf" if math.isinf(bound) else format(bound, "g")


def band_of(concurrency: float, bands: list[float]) -> float:
    """The smallest band bound ≥ ``concurrency`` (``inf`` above the highest band)."""
    for b in bands:
        if concurrency <= b:
            return b
    return math.inf


def burn_rate(good: float, total: float, objective: float) -> float:
    """Error rate ÷ error budget: ``(1 - good/total) / (1 - objective)``; NaN when no
    events. 1 means the budget lasts exactly the period."""
    if total <= 0:
        return math.nan
    return (1.0 - good / total) / (1.0 - objective)


def budget_remaining(good: float, total: float, objective: float) -> float:
    """Share of the period's error budget left: ``1 - bad / ((1 - objective) × total)``
    (1 with no events; negative when overspent)."""
    if total <= 0:
        return 1.0
    return 1.0 - (total - good) / ((1.0 - objective) * total)


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
    events: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    good: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    last_band: str | None = None


class SLOEngine:
    """Runs the SLOs of an :class:`SLOFile` over successive snapshots.

    Subscribe :meth:`update` to the scraper; read :meth:`status`, :meth:`autoscaling` or
    collect the Prometheus families of :meth:`collect`.
    """

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
        self._prev: dict[str, float] = {}  # series prefix → last cumulative value
        self._prev_running: dict[ModelKey, float] = {}
        self._parsed: dict[str, tuple[str, dict[str, str]]] = {}
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

    def _parse(self, prefix: str) -> tuple[str, dict[str, str]]:
        got = self._parsed.get(prefix)
        if got is None:
            name, pairs = split_key(prefix)
            got = (name, dict(pairs))
            if len(self._parsed) > 200_000:
                self._parsed.clear()
            self._parsed[prefix] = got
        return got

    def _delta(self, prefix: str, value: float, seen: dict[str, float]) -> float:
        """Counter delta since the previous snapshot; a decrease is a reset (the new value
        is the delta); a series seen for the first time contributes nothing."""
        seen[prefix] = value
        prev = self._prev.get(prefix)
        if prev is None:
            return 0.0
        return value - prev if value >= prev else value

    def update(self, snap: Snapshot) -> None:
        """Account one snapshot (call for every scrape, in order)."""
        t0 = time.perf_counter()
        ts = snap.timestamp
        if self._prev_ts is not None and ts <= self._prev_ts:
            return
        intervals: dict[ModelKey, _Interval] = defaultdict(_Interval)
        seen: dict[str, float] = {}
        gpu_used = gpu_total = 0.0
        for normalized in snap.targets.values():
            if normalized is None:
                continue
            u, tot = self._read(normalized, intervals, seen)
            gpu_used, gpu_total = gpu_used + u, gpu_total + tot
        self.gpu_memory_ratio = gpu_used / gpu_total if gpu_total > 0 else None
        first = self._prev_ts is None
        dt = 0.0 if first else ts - self._prev_ts
        self._prev = seen
        self._prev_ts = ts
        if not first and dt > 0:
            self._account(ts, dt, intervals)
        for mk, iv in intervals.items():
            if iv.running_now is not None:
                self._prev_running[mk] = iv.running_now
        self.last_update = ts
        self.update_seconds = time.perf_counter() - t0

    def _read(self, n: Normalized, intervals: dict[ModelKey, _Interval],
              seen: dict[str, float]) -> tuple[float, float]:
        gpu_used = gpu_total = 0.0
        for idx in self._families:
            fam_name = METRICS[idx].name
            for prefix, raw in n.families[idx].items():
                value = value_of(raw)
                name, labels = self._parse(prefix)
                if fam_name == _GPU_USED:
                    gpu_used += value
                    continue
                if fam_name == _GPU_TOTAL:
                    gpu_total += value
                    continue
                if "model" not in labels:
                    continue
                mk = (labels["model"], labels.get("model_version", ""), labels["backend"])
                iv = intervals[mk]
                if fam_name == _REQUESTS:
                    d = self._delta(prefix, value, seen)
                    iv.total_requests += d
                    if labels.get("outcome") == "success":
                        iv.good_requests += d
                elif fam_name == _ACTIVE:
                    if labels.get("state") == "running":
                        iv.running_now = (iv.running_now or 0.0) + value
                elif fam_name == _KV:
                    iv.kv_usage = max(iv.kv_usage or 0.0, value)
                elif METRICS[idx].type == "summary":
                    if "quantile" in labels:
                        iv.summaries[(fam_name, labels["quantile"])] = value
                    elif name.endswith("_count"):
                        iv.summaries[(fam_name, "_count_delta")] = (
                            iv.summaries.get((fam_name, "_count_delta"), 0.0)
                            + self._delta(prefix, value, seen))
                else:  # histogram samples
                    d = self._delta(prefix, value, seen)
                    h = iv.hists[fam_name]
                    if name.endswith("_bucket"):
                        le = float(labels["le"])
                        h.buckets[le] = h.buckets.get(le, 0.0) + d
                        self._bounds[(fam_name, mk)].add(le)
                    elif name.endswith("_sum"):
                        h.sum += d
                    elif name.endswith("_count"):
                        h.count += d
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

    def _account(self, ts: float, dt: float, intervals: dict[ModelKey, _Interval]) -> None:
        rows, goods, totals = [], [], []
        for mk, iv in intervals.items():
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
                    rows.append(self.windows.row((slo.name, mk, b)))
                    goods.append(good)
                    totals.append(total)
        self.windows.add(ts, np.asarray(rows, dtype=np.int64), np.asarray(goods, dtype=float),
                         np.asarray(totals, dtype=float))
        sums = self.windows.sums()
        for st in self.states.values():
            self._judge(st, sums)

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
        g, t = self.window_sums(st, band, window, sums)
        return burn_rate(g, t, st.slo.objective)

    def _bands(self, st: SLOModelState) -> list[tuple[float, str]]:
        bounds = [*st.slo.concurrency.bands, math.inf]
        return [(b, band_label(b)) for b in bounds]

    def _judge(self, st: SLOModelState, sums: np.ndarray) -> None:
        slo = st.slo
        if st.error is not None:
            st.state = "misconfigured"
            return
        if not st.events:
            st.state = "no_data"
            return
        period = slo.period_seconds
        burning: list[tuple[float, str]] = []
        for b, label in self._bands(st):
            for w in self.spec.windows:
                factor = w.factor(period)
                if (self.burn(st, label, w.long, sums) > factor
                        and self.burn(st, label, w.short, sums) > factor):
                    burning.append((b, label))
                    break
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
        for b, label in self._bands(st):
            if math.isinf(b):
                break
            g, t = self.window_sums(st, label, cap_cfg.window, sums)
            if t < cap_cfg.min_events:
                continue
            trusted_any = True
            if burn_rate(g, t, slo.objective) < 1.0:
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
