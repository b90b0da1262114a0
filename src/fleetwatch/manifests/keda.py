"""One KEDA ``ScaledObject`` per model deployment, on the fleetwatch autoscaling signal.

A model served disaggregated (registry ``pools:``) has a prefill and a decode Deployment,
so two ScaledObjects, each on its own pool's signal: the pods of a pool carry the label
``fleetwatch.io/role``, Prometheus copies it to ``role`` on the sidecar's series, the
recording rule keeps it, and the query selects it. Each pool's sidecar judges the SLOs of
its role (TTFT on prefill pods, ITL on decode pods; ``role:`` in the SLO file), so each
signal is that pool's load against its own capacity.

The signal of one replica is ``max`` of its load components over their targets (1 = at
its safe load, docs/autoscaling.md). What the HPA that KEDA creates does with it depends
on the metric type (Kubernetes' replica calculator, ``tolerance`` 0.1):

* **Prometheus trigger** (default): the query is the fleet-wide recording rule summed to
  one number, ``S = sum(model:fleetwatch_autoscaling_signal:sum{model="m"})`` = Σ of the
  replicas' signals, with ``metricType: AverageValue`` and ``threshold: "1"``. The HPA
  divides ``S`` by the current replica count ``N`` to compare with the target and, when
  ``|S/N − 1| > 0.1``, sets ``desired = ceil(S / 1)``: the replicas that bring every one
  back to ≤ 1. (``Value`` here would be wrong: ``desired = ceil(N · S)``.)
* **metrics-api trigger** (``--trigger metrics-api``): KEDA reads ``/autoscaling/<model>``
  of **one** sidecar behind the ``<deployment>-fleetwatch`` Service, i.e. one replica's
  signal ``s``; so ``metricType: Value`` and ``targetValue: "1"``: ``desired =
  ceil(N_ready · s)`` (``N_ready``: ready pods), which is ``ceil(S)`` when the load is
  balanced. ``AverageValue`` would give ``ceil(s)`` — one replica's signal, not the sum:
  three replicas at 1.5 would be told 2.

The Prometheus query sets ``ignoreNullValues: "false"``: no series (no sidecar scraped)
is a scaler error, on which the HPA keeps the current replicas, instead of a 0 that
would scale the model down to ``minReplicaCount``. ``minReplicaCount`` is ≥ 1 (the
registry refuses 0): the signal is measured by the replicas, so it cannot wake a model
from zero. ``cooldownPeriod`` only applies to scaling to zero in KEDA; scale-down
between ``max`` and ``min`` is paced by the HPA's ``scaleDown.stabilizationWindowSeconds``
(the highest recommendation of that window wins).

**Missing data never scales in.** A sidecar whose model's data is missing or frozen
serves a held, then saturated, signal (docs/autoscaling.md); the recording rule sums only
sidecars Prometheus scrapes (``up == 1``). When the query itself fails or finds no series
``fallback.failureThreshold`` polls in a row, KEDA's ``fallback`` takes over:
``behavior: currentReplicasIfHigher`` with ``replicas`` the deployment's minimum keeps
the current replica count (never fewer than the minimum) until the metric is back. KEDA
accepts ``fallback`` only with ``metricType: AverageValue`` (its admission webhook refuses
it otherwise), so the metrics-api trigger (``Value``) has none: there the HPA keeps the
current replicas on a scaler error, and the sidecar's held or saturated signal covers
stale data.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from fleetwatch.manifests.common import (
    MANAGED,
    MODEL_ANNOTATION,
    ROLE_LABEL,
    Deployment,
    Settings,
)
from fleetwatch.manifests.sidecar import service_name
from fleetwatch.promql import string

#: The fleet-wide recording rule (``fleetwatch rules``, alerts/recording.py).
SIGNAL_RULE = "model:fleetwatch_autoscaling_signal:sum"


def signal_query(dep: Deployment) -> str:
    """The PromQL the Prometheus trigger polls: Σ over replicas (and versions, unless the
    registry entry names one exact version; versions other deployments name exactly are
    left out) of ``dep``'s model's signal; a prefill or decode pool's own (``role``, the
    label Prometheus copies from the pool's pods, :data:`ROLE_LABEL`)."""
    matchers = [f"model={string(dep.model)}"]
    if dep.role != "both":
        matchers.append(f"role={string(dep.role)}")
    if dep.version is not None:
        matchers.append(f"model_version={string(dep.version)}")
    elif dep.other_versions:
        alternatives = "|".join(re.escape(v) for v in dep.other_versions)
        matchers.append(f"model_version!~{string(alternatives)}")
    return f"sum({SIGNAL_RULE}{{{', '.join(matchers)}}})"


def metrics_api_url(dep: Deployment) -> str:
    """``http://<deployment>-fleetwatch.<ns>.svc:<port>/autoscaling/<model>``."""
    return (f"http://{service_name(dep)}.{dep.namespace}.svc:{dep.sidecar.port}"
            f"/autoscaling/{quote(dep.model, safe='')}")


def trigger(dep: Deployment, settings: Settings) -> dict[str, Any]:
    """The scaler of ``dep`` (see module docstring for the metric types)."""
    if settings.trigger == "metrics-api":
        return {"type": "metrics-api", "name": "fleetwatch-signal", "metricType": "Value",
                "metadata": {"url": metrics_api_url(dep), "format": "json",
                             "valueLocation": "signal", "targetValue": "1"}}
    return {"type": "prometheus", "name": "fleetwatch-signal", "metricType": "AverageValue",
            "metadata": {"serverAddress": settings.prometheus_url,
                         "query": signal_query(dep), "threshold": "1",
                         "ignoreNullValues": "false"}}


#: Failed polls of the Prometheus query before KEDA's ``fallback`` applies.
FALLBACK_FAILURE_THRESHOLD = 3


def fallback(dep: Deployment, settings: Settings) -> dict[str, Any] | None:
    """KEDA's ``fallback`` for ``dep``: hold the current replicas after
    :data:`FALLBACK_FAILURE_THRESHOLD` failed polls (None for the metrics-api trigger,
    whose ``Value`` metric type KEDA refuses a fallback for)."""
    if settings.trigger == "metrics-api":
        return None
    return {"failureThreshold": FALLBACK_FAILURE_THRESHOLD, "replicas": dep.min_replicas,
            "behavior": "currentReplicasIfHigher"}


def scaled_object(dep: Deployment, settings: Settings) -> dict[str, Any]:
    """The ScaledObject of ``dep`` (named like the Deployment, in its namespace), with
    :func:`fallback` for the Prometheus trigger."""
    obj: dict[str, Any] = {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": dep.name, "namespace": dep.namespace, "labels": dict(MANAGED),
                     "annotations": {MODEL_ANNOTATION: dep.model,
                                     **({ROLE_LABEL: dep.role} if dep.role != "both"
                                        else {})}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                               "name": dep.name},
            "minReplicaCount": dep.min_replicas,
            "maxReplicaCount": dep.max_replicas,
            "pollingInterval": dep.polling_seconds,
            "cooldownPeriod": dep.cooldown_seconds,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {
                "stabilizationWindowSeconds": dep.scale_down_stabilization_seconds}}}},
            "triggers": [trigger(dep, settings)],
        },
    }
    fb = fallback(dep, settings)
    if fb is not None:
        obj["spec"]["fallback"] = fb
    return obj
