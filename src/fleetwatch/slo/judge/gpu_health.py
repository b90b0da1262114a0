"""GPU health per GPU UUID, read from the snapshot: is a GPU slowed or erroring now?

Two normalized families of dcgm-exporter feed it (``modelserver_gpu_clock_event_reasons``,
``modelserver_gpu_last_xid_code``, see :mod:`fleetwatch.exporters.sources.dcgm`):

* a **clocks-event reason** that slows the GPU (:data:`~fleetwatch.exporters.sources.dcgm.
  CLOCK_EVENT_REASONS` with ``slows``: SW power cap, HW slowdown, SW/HW thermal slowdown,
  HW power brake) set in the bitmask at a snapshot is a condition at that time;
* an **XID error**: the last-XID value changing to a non-zero code, or a non-zero code at
  the first snapshot that shows the GPU (dcgm keeps the last code: a new value is a new
  error), is the condition ``xid`` at that time.

:meth:`GPUHealth.conditions` answers which conditions a GPU had since a time.
Bounded: conditions older than ``horizon`` seconds are dropped, and so is a GPU unseen for
that long (the SLO engine passes its fastest window pair's long window).
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources.dcgm import clock_event_reasons
from fleetwatch.labels.schema import METRICS

EVENTS = "modelserver_gpu_clock_event_reasons"
XID = "modelserver_gpu_last_xid_code"
_FAMILIES = tuple(i for i, m in enumerate(METRICS) if m.name in (EVENTS, XID))
#: Condition samples kept per GPU (one per snapshot at most; the horizon bounds it too).
MAX_EVENTS_PER_GPU = 4096
#: GPUs tracked at most (a node has a handful; this bounds label churn).
MAX_GPUS = 1024


class _Seen(NamedTuple):
    """A GPU's ``conditions`` at the snapshot of ``t`` (Unix seconds)."""

    t: float
    conditions: frozenset[str]


class GPUHealth:
    """Conditions per GPU UUID over the last ``horizon`` seconds."""

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._events: dict[str, deque[_Seen]] = {}
        self._xid: dict[str, float] = {}  # gpu_uuid → last XID code seen
        self._seen: dict[str, float] = {}  # gpu_uuid → when last seen

    def observe(self, snap: Snapshot) -> None:
        """Read every target's GPU health series at the snapshot's time."""
        ts = snap.timestamp
        now: dict[str, set[str]] = {}
        for n in snap.targets.values():
            if n is None:
                continue
            for idx in _FAMILIES:
                name = METRICS[idx].name
                for prefix, raw in n.families[idx].items():
                    uuid = dict(n.key(prefix)[1]).get("gpu_uuid")
                    if not uuid:
                        continue
                    value = raw if raw.__class__ is float else float(raw)
                    if value - value != 0.0:
                        continue  # NaN/±Inf: no evidence
                    conds = now.setdefault(uuid, set())
                    if name == EVENTS:
                        conds.update(r.name for r in clock_event_reasons(value) if r.slows)
                    else:
                        before = self._xid.get(uuid)
                        if value != 0.0 and value != before:
                            conds.add("xid")
                        self._xid[uuid] = value
        for uuid, conds in now.items():
            if uuid not in self._seen and len(self._seen) >= MAX_GPUS:
                continue
            self._seen[uuid] = ts
            if conds:
                q = self._events.setdefault(uuid, deque(maxlen=MAX_EVENTS_PER_GPU))
                q.append(_Seen(ts, frozenset(conds)))
        self._expire(ts)

    def _expire(self, ts: float) -> None:
        horizon = ts - self.horizon
        for uuid in [u for u, t in self._seen.items() if t < horizon]:
            del self._seen[uuid]
            self._events.pop(uuid, None)
            self._xid.pop(uuid, None)
        for q in self._events.values():
            while q and q[0].t < horizon:
                q.popleft()

    def conditions(self, gpu_uuid: str, since: float) -> list[str]:
        """The conditions a GPU had at a snapshot at or after ``since`` (Unix seconds),
        sorted; empty for a healthy or unknown GPU."""
        q = self._events.get(gpu_uuid)
        if not q:
            return []
        return sorted({c for t, conds in q if t >= since for c in conds})
