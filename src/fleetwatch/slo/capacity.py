"""Capacity at SLO: the highest concurrency band a model keeps its SLO in.

Walking up from the lowest band, a band is *trusted* once it has at least
``capacity.min_events`` events over the capacity window; untrusted bands are skipped, a
trusted band burning below 1 raises the estimate to its bound, and the first trusted band
that burns (≥ 1) stops the walk. Before any band is trusted the estimate is the envelope;
when only the lowest trusted band burns the last estimate is kept (that is a regression,
not a capacity). A new estimate is adopted only after it held for
``capacity.hysteresis_updates`` consecutive updates.

Capacity is in concurrent requests per replica (a band bound).
"""

from __future__ import annotations

import math
from enum import Enum

from fleetwatch.slo.spec import CapacitySettings
from fleetwatch.slo.state import SLOModelState


class Evidence(Enum):
    """Where an estimate came from: ``ENVELOPE`` (no band trusted yet: the configured
    envelope), ``KEPT`` (trusted bands, none below 1: the last capacity), ``BANDS`` (the
    highest trusted band burning below 1)."""

    ENVELOPE = "envelope"
    KEPT = "kept"
    BANDS = "bands"


def estimate(st: SLOModelState, cfg: CapacitySettings, window_totals: list[float],
             window_burn: list[float]) -> tuple[float, Evidence]:
    """This update's capacity estimate of one SLO and model and its evidence, from the
    events and burn rate of every window-store row over the capacity window."""
    found: float | None = None
    trusted_any = False
    for b, label in st.band_bounds():
        row = st.rows.get(label)
        if math.isinf(b) or row is None:
            continue
        if window_totals[row] < cfg.min_events:
            continue
        trusted_any = True
        if window_burn[row] < 1.0:
            found = b
        else:
            break
    if found is not None:
        return found, Evidence.BANDS
    if trusted_any:
        return st.capacity, Evidence.KEPT
    return st.slo.concurrency.envelope, Evidence.ENVELOPE


def adopt(st: SLOModelState, value: float, cfg: CapacitySettings) -> None:
    """Apply hysteresis: ``st.capacity`` becomes ``value`` once it was the estimate for
    ``cfg.hysteresis_updates`` consecutive updates (at once when that is 1)."""
    if value == st.capacity:
        st.pending_capacity, st.pending_count = None, 0
    elif value == st.pending_capacity:
        st.pending_count += 1
        if st.pending_count >= cfg.hysteresis_updates:
            st.capacity, st.pending_capacity, st.pending_count = value, None, 0
    else:
        st.pending_capacity, st.pending_count = value, 1
        if cfg.hysteresis_updates <= 1:
            st.capacity, st.pending_capacity, st.pending_count = value, None, 0


def update_capacity(st: SLOModelState, cfg: CapacitySettings, window_totals: list[float],
                    window_burn: list[float]) -> None:
    """One update of ``st.capacity``/``st.capacity_evidence`` (see the module doc)."""
    value, evidence = estimate(st, cfg, window_totals, window_burn)
    adopt(st, value, cfg)
    if st.capacity == value:
        st.capacity_evidence = evidence.value
