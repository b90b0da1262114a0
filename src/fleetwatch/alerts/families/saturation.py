"""Saturation alerts: ``FleetwatchQueueWaitHigh`` (mean scheduler-queue wait over 5 minutes,
all replicas), ``FleetwatchKVCacheNearExhaustion`` (the fullest replica's KV cache) —
both with owners joined from ``modelserver_model_info`` — and
``FleetwatchGPUMemoryHeadroomLow`` (per GPU, platform team).

Scenario (one group): each above its threshold for its ``for:`` fires, below does not;
queue waits are summed over two replicas.
"""

from __future__ import annotations

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.annotations import MODEL, OWNER, PERCENT, VALUE, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.numbers import num, percent
from fleetwatch.alerts.owners import with_owner
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import (
    BACKEND,
    Suite,
    TestGroup,
    concrete,
    expected,
    info_series,
    linear,
    minutes,
    owner_sample,
)
from fleetwatch.labels.registry import Registry

QUEUE_WAIT_HIGH = "FleetwatchQueueWaitHigh"
KV_CACHE_FULL = "FleetwatchKVCacheNearExhaustion"
GPU_MEMORY_LOW = "FleetwatchGPUMemoryHeadroomLow"


def saturation_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """Queue wait, KV cache and GPU memory rules, in that order."""
    p, urls, team = cfg.platform, cfg.urls, cfg.platform.team
    qw, kv, gpu = p.queue_wait, p.kv_cache, p.gpu_memory
    return (
        AlertRule(
            QUEUE_WAIT_HIGH,
            with_owner(f"{rec.latency('modelserver_queue_duration_seconds', 'mean')} > "
                       f"{num(qw.seconds)}", team),
            (("severity", qw.severity),),
            alert_annotations(
                urls, QUEUE_WAIT_HIGH,
                f"Queue wait of {label('model')} is {VALUE} s",
                f"Requests to model {MODEL} wait {VALUE} s on average in the scheduler "
                f"queue (over 5 minutes, all replicas), above {num(qw.seconds)} s for "
                f"{qw.for_}: more load than capacity, or a stuck batcher. {OWNER}",
                autoscaler=True),
            qw.for_),
        AlertRule(
            KV_CACHE_FULL,
            with_owner(f"{rec.KV_CACHE_USAGE} > {num(kv.usage_ratio)}", team),
            (("severity", kv.severity),),
            alert_annotations(
                urls, KV_CACHE_FULL,
                f"KV cache of {label('model')} is {PERCENT} full",
                f"The KV cache of model {MODEL} is {PERCENT} "
                f"used on its fullest replica, above {percent(kv.usage_ratio)} for "
                f"{kv.for_}: requests will be preempted or queued. {OWNER}",
                autoscaler=True),
            kv.for_),
        AlertRule(
            GPU_MEMORY_LOW,
            f"{rec.GPU_MEMORY_USAGE} > {num(gpu.usage_ratio)}",
            (("severity", gpu.severity), ("team", team)),
            alert_annotations(
                urls, GPU_MEMORY_LOW,
                f"GPU {label('gpu_uuid')} memory is {PERCENT} used",
                f"GPU {label('gpu_uuid')} (seen by {label('backend')}) has "
                f"{PERCENT} of its memory in use, above "
                f"{percent(gpu.usage_ratio)} for {gpu.for_}: no headroom to load another "
                f"model or grow a KV cache."),
            gpu.for_),
    )


def saturation_scenarios(suite: Suite) -> list[TestGroup]:
    """One group for the three alerts, with the first registry entry's model."""
    registry, rules, p = suite.registry, suite.rules, suite.cfg.platform
    entry = registry.entries[0] if registry.entries else None
    model = concrete(entry.name) if entry else "model-a"
    g = TestGroup("Queue wait, KV cache and GPU memory: above the threshold for its for: "
                  "fires (owners joined from modelserver_model_info), below does not")
    qw, kv, gpu = p.queue_wait, p.kv_cache, p.gpu_memory
    qmins, kmins, gmins = (minutes(x.for_) for x in (qw, kv, gpu))
    steps = max(qmins, kmins, gmins) + 10
    for version, wait in (("slow", qw.seconds * 1.5), ("fast", qw.seconds / 2)):
        mk = {"model": model, "model_version": version, "backend": BACKEND}
        for inst in ("sidecar-a:9810", "sidecar-b:9810"):  # two replicas: summed
            g.add("modelserver_queue_duration_seconds_count", {**mk, "instance": inst},
                  linear(120, steps))
            g.add("modelserver_queue_duration_seconds_sum", {**mk, "instance": inst},
                  linear(120 * wait, steps))
        info_series(g, model, version, registry.lookup(model, version), steps)
    for version, usage in (("full", kv.usage_ratio + (1 - kv.usage_ratio) / 2),
                           ("roomy", kv.usage_ratio / 2)):
        mk = {"model": model, "model_version": version, "backend": "vllm"}
        g.add("modelserver_kv_cache_usage_ratio", {**mk, "instance": "sidecar-a:9810"},
              linear(0, steps, usage))
        g.add("modelserver_kv_cache_usage_ratio", {**mk, "instance": "sidecar-b:9810"},
              linear(0, steps, usage / 2))
    for uuid, ratio in (("GPU-full", gpu.usage_ratio + (1 - gpu.usage_ratio) / 2),
                        ("GPU-roomy", gpu.usage_ratio / 2)):
        lab = {"gpu_uuid": uuid, "backend": "dcgm", "instance": "sidecar-a:9810"}
        g.add("modelserver_gpu_memory_total_bytes", lab, linear(0, steps, 2**34))
        g.add("modelserver_gpu_memory_used_bytes", lab, linear(0, steps, ratio * 2**34))
    # the 5-minute rate needs 1 step before the condition holds
    g.expect(qmins, QUEUE_WAIT_HIGH, [])
    g.expect(qmins + 2, QUEUE_WAIT_HIGH, [expected(
        rules.find(QUEUE_WAIT_HIGH),
        {"model": model, "model_version": "slow", "backend": BACKEND,
         **owner_sample(registry.lookup(model, "slow"), p.team)}, qw.seconds * 1.5)])
    g.expect(kmins - 1, KV_CACHE_FULL, [])
    kv_model = {"model": model, "model_version": "full", "backend": "vllm"}
    g.expect(kmins + 1, KV_CACHE_FULL, [expected(
        rules.find(KV_CACHE_FULL), {**kv_model, "team": p.team},
        kv.usage_ratio + (1 - kv.usage_ratio) / 2)])
    g.expect(gmins - 1, GPU_MEMORY_LOW, [])
    g.expect(gmins + 1, GPU_MEMORY_LOW, [expected(
        rules.find(GPU_MEMORY_LOW), {"gpu_uuid": "GPU-full", "backend": "dcgm"},
        gpu.usage_ratio + (1 - gpu.usage_ratio) / 2)])
    return [g]


FAMILY = PlatformFamily("saturation", (QUEUE_WAIT_HIGH, KV_CACHE_FULL, GPU_MEMORY_LOW),
                        saturation_alerts, saturation_scenarios)
