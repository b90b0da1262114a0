"""NVIDIA dcgm-exporter (``DCGM_FI_*`` on ``:9400/metrics``) → normalized GPU metrics.

Source: ``docs/sources.md`` § NVIDIA dcgm-exporter (NVIDIA/dcgm-exporter
``etc/default-counters.csv``, ``render_metrics.go``, ``transformation/const.go``; 2.x →
4.8.2 and main). Conversions: ``DCGM_FI_DEV_GPU_UTIL`` % → ratio (÷100;
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` as fallback), framebuffer MiB → bytes (×2^20; total =
FB_TOTAL, else FREE + USED + RESERVED summed), energy mJ → J (÷1000, since boot), clocks
MHz → Hz (×10^6). GPU health: temperatures, SM/memory clocks, the clocks-event (throttle)
reasons bitmask (``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``, DCGM 3.3+;
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` before, the same field 112) copied as a number and
decoded with :data:`CLOCK_EVENT_REASONS` (NVML ``nvmlClocksEventReason*``; neither is in
the default CSV) and the last XID error (``DCGM_FI_DEV_XID_ERRORS``, default counters; its
``err_code`` and ``err_msg`` labels are dropped: the value is the code). Labels:
``UUID``/``uuid`` → ``gpu_uuid``, ``Hostname``/``hostname`` → ``hostname``, ``modelName``
→ ``gpu_model``, MIG ``GPU_I_PROFILE``/``GPU_I_ID`` → ``mig_profile``/``mig_instance``,
and the pod mapping ``pod``/``namespace``/``container`` →
``pod_name``/``pod_namespace``/``container_name`` (dcgm-exporter's own old names; they
would clash with Kubernetes target labels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from fleetwatch.exporters.source import Source
from fleetwatch.exporters.table import Rule, SourceTable

MIB = float(1 << 20)
MHZ = 1e6


@dataclass(frozen=True)
class ClockEventReason:
    """One bit of NVML's clocks-event reasons bitmask (``nvmlClocksEventReason*``, formerly
    ``nvmlClocksThrottleReason*``; dcgm field 112). ``slows``: the GPU is slower than it
    should be for a reason outside the model (power, heat, hardware), which the SLO engine
    attributes a latency regression to (``gpu_degraded``); idle and application/display
    clock settings are not."""

    bit: int
    name: str  # the gpu_condition label value
    slows: bool
    help: str


#: NVML ``nvml.h`` ``nvmlClocksEventReason*`` (driver r535+; the same bits as the older
#: ``nvmlClocksThrottleReason*``).
CLOCK_EVENT_REASONS: tuple[ClockEventReason, ...] = (
    ClockEventReason(0x1, "gpu_idle", False, "nothing runs: clocks drop to idle"),
    ClockEventReason(0x2, "applications_clocks_setting", False,
                     "clocks held by the applications clocks setting"),
    ClockEventReason(0x4, "sw_power_cap", True, "software power scaling (power cap)"),
    ClockEventReason(0x8, "hw_slowdown", True,
                     "hardware slowdown (thermal, power brake or external signal)"),
    ClockEventReason(0x10, "sync_boost", False, "held to the sync-boost group's clocks"),
    ClockEventReason(0x20, "sw_thermal_slowdown", True, "software thermal slowdown"),
    ClockEventReason(0x40, "hw_thermal_slowdown", True, "hardware thermal slowdown"),
    ClockEventReason(0x80, "hw_power_brake_slowdown", True,
                     "hardware power brake (external power supply)"),
    ClockEventReason(0x100, "display_clock_setting", False,
                     "clocks held by the display clock setting"),
)


def clock_event_reasons(mask: float) -> tuple[ClockEventReason, ...]:
    """The reasons set in a clocks-event bitmask value (``modelserver_gpu_clock_event_
    reasons``; a float as scraped, truncated to an integer; negative or not finite: none)."""
    if not math.isfinite(mask) or mask < 0:
        return ()
    m = int(mask)
    return tuple(r for r in CLOCK_EVENT_REASONS if m & r.bit)


def _g(field: str, target: str, since: str = "default counters", **kw: Any) -> Rule:
    return Rule(f"DCGM_FI_{field}", "gauge", target, since=since, **kw)


RULES: tuple[Rule, ...] = (
    _g("DEV_GPU_UTIL", "modelserver_gpu_utilization_ratio", divide=100.0),
    _g("PROF_GR_ENGINE_ACTIVE", "modelserver_gpu_utilization_ratio", priority=1,
       since="DCP metrics (Volta+), ratio 0–1"),
    _g("DEV_FB_USED", "modelserver_gpu_memory_used_bytes", multiply=MIB),
    _g("DEV_FB_TOTAL", "modelserver_gpu_memory_total_bytes", multiply=MIB,
       since="not in the default CSV"),
    _g("DEV_FB_FREE", "modelserver_gpu_memory_total_bytes", multiply=MIB, priority=1,
       since="default counters (summed: free + used + reserved)"),
    _g("DEV_FB_USED", "modelserver_gpu_memory_total_bytes", multiply=MIB, priority=1,
       since="default counters (summed: free + used + reserved)"),
    _g("DEV_FB_RESERVED", "modelserver_gpu_memory_total_bytes", multiply=MIB, priority=1,
       since="default counters 3.x+ (summed: free + used + reserved)"),
    _g("DEV_POWER_USAGE", "modelserver_gpu_power_watts"),
    _g("DEV_POWER_MGMT_LIMIT", "modelserver_gpu_power_limit_watts",
       since="not in the default CSV"),
    Rule("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
         "modelserver_gpu_energy_joules_total", divide=1e3, since="default counters (mJ)"),
    _g("DEV_GPU_TEMP", "modelserver_gpu_temperature_celsius"),
    _g("DEV_MEMORY_TEMP", "modelserver_gpu_memory_temperature_celsius"),
    _g("DEV_SM_CLOCK", "modelserver_gpu_sm_clock_hertz", multiply=MHZ),
    _g("DEV_MEM_CLOCK", "modelserver_gpu_memory_clock_hertz", multiply=MHZ),
    _g("DEV_CLOCKS_EVENT_REASONS", "modelserver_gpu_clock_event_reasons",
       since="DCGM 3.3+ name of field 112, not in the default CSV"),
    _g("DEV_CLOCK_THROTTLE_REASONS", "modelserver_gpu_clock_event_reasons", priority=1,
       since="field 112 before DCGM 3.3, not in the default CSV"),
    _g("DEV_XID_ERRORS", "modelserver_gpu_last_xid_code", drop=("err_code", "err_msg"),
       since="default counters (the last XID; err_code/err_msg labels in 3.x+)"),
)

LABEL_RENAMES = MappingProxyType({
    "UUID": "gpu_uuid",
    "uuid": "gpu_uuid",
    "Hostname": "hostname",
    "modelName": "gpu_model",
    "GPU_I_PROFILE": "mig_profile",
    "GPU_I_ID": "mig_instance",
    "pod": "pod_name",
    "namespace": "pod_namespace",
    "container": "container_name",
})

TABLE = SourceTable(
    kind="dcgm",
    backend="dcgm",
    rules=RULES,
    label_renames=LABEL_RENAMES,
    description="NVIDIA dcgm-exporter 2.x–4.8 and main",
)


def _claims(name: str, _line: str) -> bool:
    return name.startswith("DCGM_FI_")


SOURCE = Source(
    kind="dcgm",
    table=TABLE,
    description="NVIDIA dcgm-exporter (GPU telemetry; no models, so no readiness)",
    claims=_claims,
    default_port=9400,
    detect_priority=30,
    component_names=(("dcgm", "dcgm-exporter"),),
)
