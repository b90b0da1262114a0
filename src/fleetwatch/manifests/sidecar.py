"""The sidecar in the inference pod: its ConfigMap, container, Deployment patch, Service.

The container runs the image's entrypoint (``fleetwatch serve``) with
``--config /etc/fleetwatch/sidecar.yaml --slos /etc/fleetwatch/slos.yaml`` from a
ConfigMap mounted read-only at ``/etc/fleetwatch`` (``sidecar.yaml``, ``models.yaml``,
``slos.yaml``). With ``traces:`` in the configuration the OTLP/HTTP trace receiver
listens on loopback, where the engines of the pod send their spans; only with
``traces.auth`` (a bearer token or mutual TLS) do the container and the Service expose
its port, named ``otlp-http`` (``traces.listen.port``, 4318 by default), and the Secret
``otlp_secret`` (a setting) is mounted read-only at the folder of the auth files.
Probes, on the named port ``fleetwatch``:

* ``livenessProbe`` ``/healthz`` (the process answers; never depends on the engine);
* ``readinessProbe`` ``/readyz`` (every required target up, its listed models ready), so
  the pod is Ready only when the engine is;
* ``startupProbe`` ``/readyz`` every 10 s for ``startup_seconds`` (registry field, else
  600 s for the ``streaming``/``batch`` tiers and 120 s otherwise): no liveness checks
  while an LLM loads its weights; past the allowance the kubelet restarts the sidecar
  (not the engine), which shows in its restart count.

Restarts (``docs/reliability.md``): with ``state_dir`` the pod gets an ``emptyDir`` volume
``fleetwatch-state`` mounted at ``/var/lib/fleetwatch`` (the snapshot outlives a container
restart; a new pod recovers from Prometheus); with ``shutdown.drain_seconds`` the pod's
``terminationGracePeriodSeconds`` exceeds the drain; a ``slo.recover.match`` naming
``${POD_NAME}`` or ``${POD_NAMESPACE}`` gets them from the downward API.

Security: non-root uid/gid 65532 (the image's user), no privilege escalation, every
capability dropped, read-only root filesystem, ``RuntimeDefault`` seccomp.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from fleetwatch.manifests.common import (
    CONFIG_DIR,
    CONFIG_HASH_ANNOTATION,
    CONTAINER,
    DEPLOYMENT_LABEL,
    GRACE_MARGIN_SECONDS,
    MANAGED,
    OTLP_AUTH_VOLUME,
    OTLP_PORT_NAME,
    PORT_NAME,
    ROLE_LABEL,
    SERVICE_LABELS,
    SIDECAR_LABEL,
    STARTUP_PERIOD_SECONDS,
    STATE_DIR,
    STATE_VOLUME,
    VOLUME,
    Deployment,
    Settings,
    SidecarSpec,
    startup_failure_threshold,
)

UID = 65532


def configmap_name(sidecar: SidecarSpec) -> str:
    """``fleetwatch-<config stem>``."""
    return f"fleetwatch-{sidecar.name}"


def config_data(sidecar: SidecarSpec, registry_text: str, slos_text: str) -> dict[str, str]:
    """The ConfigMap's files: ``sidecar.yaml``, ``models.yaml``, ``slos.yaml`` (and
    ``quotas.yaml`` when the configuration names a quota file)."""
    data = {"models.yaml": registry_text, "sidecar.yaml": sidecar.config_yaml,
            "slos.yaml": slos_text}
    if sidecar.quotas_yaml is not None:
        data["quotas.yaml"] = sidecar.quotas_yaml
    return data


def config_hash(data: dict[str, str]) -> str:
    """First 16 hex digits of the SHA-256 of the ConfigMap's files (sorted by name): a pod
    template annotation, so that a changed configuration rolls the pods."""
    h = hashlib.sha256()
    for key in sorted(data):
        h.update(key.encode() + b"\0" + data[key].encode() + b"\0")
    return h.hexdigest()[:16]


def configmap(sidecar: SidecarSpec, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    """The sidecar's ConfigMap in ``namespace``."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": configmap_name(sidecar), "namespace": namespace,
                         "labels": {**SERVICE_LABELS, **MANAGED}},
            "data": dict(sorted(data.items()))}


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": PORT_NAME}, "periodSeconds": period,
            "timeoutSeconds": 2, "failureThreshold": failures}


def _ports(dep: Deployment, key: str) -> list[dict[str, Any]]:
    """The named ports (``key``: ``containerPort`` or ``port``): the sidecar's, and the
    OTLP/HTTP trace receiver's when it is exposed (``traces.auth`` set)."""
    ports = [(PORT_NAME, dep.sidecar.port)]
    if dep.sidecar.otlp_port is not None:
        ports.append((OTLP_PORT_NAME, dep.sidecar.otlp_port))
    return [{"name": name, key: port, "protocol": "TCP"} for name, port in ports]


def container(dep: Deployment, settings: Settings) -> dict[str, Any]:
    """The sidecar container of ``dep``'s pods."""
    return {
        "name": CONTAINER,
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config", f"{CONFIG_DIR}/sidecar.yaml", "--slos", f"{CONFIG_DIR}/slos.yaml"],
        "ports": _ports(dep, "containerPort"),
        "startupProbe": _probe("/readyz", STARTUP_PERIOD_SECONDS,
                               startup_failure_threshold(dep.startup_seconds)),
        "livenessProbe": _probe("/healthz", 10, 3),
        "readinessProbe": _probe("/readyz", 5, 2),
        "resources": {"requests": {"cpu": settings.cpu_request,
                                   "memory": settings.memory_request},
                      "limits": {"memory": settings.memory_limit}},
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": _mounts(dep),
        **({"env": [_field_env("POD_NAME", "metadata.name"),
                    _field_env("POD_NAMESPACE", "metadata.namespace")]}
           if dep.sidecar.pod_env else {}),
    }


def _field_env(name: str, path: str) -> dict[str, Any]:
    """An environment variable from the downward API (``fieldRef``)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _pod_extras(dep: Deployment) -> dict[str, Any]:
    """The pod spec's ``terminationGracePeriodSeconds`` when the sidecar drains on SIGTERM:
    the drain plus :data:`GRACE_MARGIN_SECONDS` (at least Kubernetes' default 30 s), so the
    kubelet does not kill it before it saved its state. No ``preStop`` hook: the sidecar
    drains on SIGTERM itself."""
    drain = dep.sidecar.drain_seconds
    if drain <= 0:
        return {}
    return {"terminationGracePeriodSeconds": max(30, math.ceil(drain) + GRACE_MARGIN_SECONDS)}


def _mounts(dep: Deployment) -> list[dict[str, Any]]:
    """The ConfigMap at :data:`CONFIG_DIR`, the state volume at :data:`STATE_DIR` when the
    sidecar keeps a ``state_dir``, and the OTLP auth Secret at the folder of the
    ``traces.auth`` files when the receiver is exposed."""
    mounts = [{"name": VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]
    if dep.sidecar.state:
        mounts.append({"name": STATE_VOLUME, "mountPath": STATE_DIR})
    if dep.sidecar.otlp_auth_dir is not None:
        mounts.append({"name": OTLP_AUTH_VOLUME, "mountPath": dep.sidecar.otlp_auth_dir,
                       "readOnly": True})
    return mounts


def _volumes(dep: Deployment, settings: Settings) -> list[dict[str, Any]]:
    """The volumes :func:`_mounts` mounts (the state volume an ``emptyDir``: it outlives a
    container restart, not the pod)."""
    volumes: list[dict[str, Any]] = [{"name": VOLUME,
                                      "configMap": {"name": configmap_name(dep.sidecar)}}]
    if dep.sidecar.state:
        volumes.append({"name": STATE_VOLUME, "emptyDir": {}})
    if dep.sidecar.otlp_auth_dir is not None:
        volumes.append({"name": OTLP_AUTH_VOLUME,
                        "secret": {"secretName": settings.otlp_secret}})
    return volumes


def deployment_patch(dep: Deployment, settings: Settings, data_hash: str) -> dict[str, Any]:
    """A strategic-merge patch adding the sidecar to ``dep``'s existing Deployment:
    ``kubectl patch deployment NAME -n NS --type strategic --patch-file FILE`` or a
    kustomize ``patches:`` entry. Containers and volumes merge by name, so the engine's
    own containers are kept; the pod labels it adds select the pods for the monitors and
    the Service (the Deployment's own selector is untouched)."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": dep.name, "namespace": dep.namespace},
        "spec": {"template": {
            "metadata": {"labels": {SIDECAR_LABEL: "true", DEPLOYMENT_LABEL: dep.name,
                                    **({ROLE_LABEL: dep.role} if dep.role != "both"
                                       else {})},
                         "annotations": {CONFIG_HASH_ANNOTATION: data_hash}},
            "spec": {
                **_pod_extras(dep),
                "containers": [container(dep, settings)],
                "volumes": _volumes(dep, settings),
            },
        }},
    }


def service_name(dep: Deployment) -> str:
    """``<deployment>-fleetwatch``."""
    return f"{dep.name}-fleetwatch"


def service(dep: Deployment) -> dict[str, Any]:
    """A ClusterIP Service in front of ``dep``'s sidecars (ServiceMonitor, metrics-api;
    the OTLP trace receiver when it is exposed with authentication)."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(dep), "namespace": dep.namespace,
                     "labels": {**SERVICE_LABELS, **MANAGED, DEPLOYMENT_LABEL: dep.name}},
        "spec": {"type": "ClusterIP",
                 "selector": {SIDECAR_LABEL: "true", DEPLOYMENT_LABEL: dep.name},
                 "ports": [{"name": p["name"], "port": p["port"], "targetPort": p["name"],
                            "protocol": "TCP"} for p in _ports(dep, "port")]},
    }
