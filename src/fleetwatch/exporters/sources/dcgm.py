"""NVIDIA dcgm-exporter (``DCGM_FI_*`` on ``:9400/metrics``) → normalized GPU metrics.

Source: METRIC_CATALOG §5 (NVIDIA/dcgm-exporter ``etc/default-counters.csv``,
``render_metrics.go``, ``transformation/const.go``; 2.x → 4.8.2 and main). Conversions:
``DCGM_FI_DEV_GPU_UTIL`` % → ratio (÷100; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` as fallback),
framebuffer MiB → bytes (×2^20; total = FB_TOTAL, else FREE + USED + RESERVED summed),
energy mJ → J (÷1000, since boot). Labels: ``UUID``/``uuid`` → ``gpu_uuid``,
``Hostname``/``hostname`` → ``hostname``, ``modelName`` → ``gpu_model``, MIG
``GPU_I_PROFILE``/``GPU_I_ID`` → ``mig_profile``/``mig_instance``, and the pod mapping
``pod``/``namespace``/``container`` → ``pod_name``/``pod_namespace``/``container_name``
(dcgm-exporter's own old names; they would clash with Kubernetes target labels).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from fleetwatch.exporters.source import Source
from fleetwatch.exporters.table import Rule, SourceTable

MIB = float(1 << 20)


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
