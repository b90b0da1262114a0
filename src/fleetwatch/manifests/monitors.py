"""How Prometheus finds the sidecars: prometheus-operator ``PodMonitor`` /
``ServiceMonitor``, and the same as a plain Prometheus ``scrape_configs`` entry.

All three select the pods the Deployment patch labelled ``fleetwatch.io/sidecar: "true"``,
scrape the named port ``fleetwatch`` at ``/metrics`` and set ``job`` to the alerting
configuration's ``platform.sidecar_job`` (default ``fleetwatch``: the sidecar-down alert
is ``up{job="fleetwatch"} == 0``). Target labels: ``namespace``, ``pod``, ``container``,
``endpoint``, ``job``, ``instance`` (pod IP:port) — what the operator's PodMonitor
relabelling gives, so rules and dashboards see the same series either way — and ``role``
on the pods of a prefill or decode pool (their ``fleetwatch.io/role`` label).

:func:`scrape_config` with ``file_sd`` files gives the identical relabelling over
file-based discovery whose targets carry the ``__meta_kubernetes_pod_*`` labels Kubernetes
discovery would: the fleet test drives real Prometheus and VictoriaMetrics with it.
"""

from __future__ import annotations

from typing import Any

from fleetwatch.manifests.common import (
    MANAGED,
    PORT_NAME,
    ROLE_LABEL,
    SERVICE_LABELS,
    SIDECAR_LABEL,
    Deployment,
    Settings,
)
from fleetwatch.slo.durations import format_duration


def _meta_label(label: str) -> str:
    """Kubernetes discovery's name of a pod label: ``__meta_kubernetes_pod_label_<x>``."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def scrape_interval(deployments: list[Deployment]) -> str:
    """The shortest scrape interval of the deployments' sidecars (Prometheus duration)."""
    return format_duration(min(d.sidecar.interval_seconds for d in deployments))


def namespaces(deployments: list[Deployment]) -> list[str]:
    """The deployments' namespaces, sorted, once each."""
    return sorted({d.namespace for d in deployments})


def _metadata(name: str, settings: Settings) -> dict[str, Any]:
    labels = {**SERVICE_LABELS, **MANAGED}
    if settings.release:
        labels["release"] = settings.release
    return {"name": name, "namespace": settings.monitoring_namespace, "labels": labels}


def _job_relabeling(job: str) -> list[dict[str, Any]]:
    """``job`` set to the alerting configuration's, and a disaggregated pool's role copied
    from its pods' :data:`ROLE_LABEL` to ``role`` (no label for a whole-request pool)."""
    return [{"action": "replace", "targetLabel": "job", "replacement": job},
            {"action": "replace", "sourceLabels": [_meta_label(ROLE_LABEL)],
             "targetLabel": "role"}]


def pod_monitor(deployments: list[Deployment], settings: Settings, job: str
                ) -> dict[str, Any]:
    """One PodMonitor for every sidecar pod in the deployments' namespaces."""
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": _metadata("fleetwatch-sidecars", settings),
        "spec": {
            "selector": {"matchLabels": {SIDECAR_LABEL: "true"}},
            "namespaceSelector": {"matchNames": namespaces(deployments)},
            "podMetricsEndpoints": [{
                "port": PORT_NAME, "path": "/metrics",
                "interval": scrape_interval(deployments),
                "relabelings": _job_relabeling(job),
            }],
        },
    }


def service_monitor(deployments: list[Deployment], settings: Settings, job: str
                    ) -> dict[str, Any]:
    """One ServiceMonitor for every ``<deployment>-fleetwatch`` Service."""
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": _metadata("fleetwatch-sidecars", settings),
        "spec": {
            "selector": {"matchLabels": dict(SERVICE_LABELS)},
            "namespaceSelector": {"matchNames": namespaces(deployments)},
            "endpoints": [{
                "port": PORT_NAME, "path": "/metrics",
                "interval": scrape_interval(deployments),
                "relabelings": _job_relabeling(job),
            }],
        },
    }


def relabel_configs(job: str) -> list[dict[str, Any]]:
    """Prometheus ``relabel_configs`` doing what the PodMonitor does, over pod discovery
    labels: keep labelled sidecar pods' ``fleetwatch`` port, drop finished pods, set the
    target labels (see module docstring)."""
    return [
        {"source_labels": [_meta_label(SIDECAR_LABEL)], "regex": "true", "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_container_port_name"],
         "regex": PORT_NAME, "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Failed|Succeeded",
         "action": "drop"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"],
         "target_label": "container"},
        {"target_label": "endpoint", "replacement": PORT_NAME},
        {"target_label": "job", "replacement": job},
        {"source_labels": [_meta_label(ROLE_LABEL)], "target_label": "role"},
    ]


def scrape_config(deployments: list[Deployment], job: str,
                  file_sd: list[str] | None = None,
                  interval: str | None = None) -> dict[str, Any]:
    """A Prometheus configuration file (``scrape_configs`` only) scraping the sidecars.

    Kubernetes pod discovery in the deployments' namespaces, or with ``file_sd`` (file
    paths) file-based discovery whose targets carry ``__meta_kubernetes_*`` labels;
    ``interval`` overrides the sidecars' shortest scrape interval.
    """
    sd: dict[str, Any]
    if file_sd is None:
        sd = {"kubernetes_sd_configs": [{"role": "pod",
                                         "namespaces": {"names": namespaces(deployments)}}]}
    else:
        sd = {"file_sd_configs": [{"files": list(file_sd), "refresh_interval": "5s"}]}
    return {"scrape_configs": [{
        "job_name": job,
        "scrape_interval": interval or scrape_interval(deployments),
        "metrics_path": "/metrics",
        **sd,
        "relabel_configs": relabel_configs(job),
    }]}


def file_sd_target(address: str, namespace: str, pod: str, labels: dict[str, str],
                   container: str = "fleetwatch", port_name: str = PORT_NAME,
                   phase: str = "Running") -> dict[str, Any]:
    """One file_sd entry shaped like Kubernetes pod discovery's target for ``address``
    (``host:port``): the test's stand-in for a pod (``labels`` are its pod labels)."""
    meta = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": pod,
            "__meta_kubernetes_pod_container_name": container,
            "__meta_kubernetes_pod_container_port_name": port_name,
            "__meta_kubernetes_pod_phase": phase}
    meta.update({_meta_label(k): v for k, v in labels.items()})
    return {"targets": [address], "labels": dict(sorted(meta.items()))}
