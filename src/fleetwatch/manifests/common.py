"""Shared shapes of ``fleetwatch manifests``: settings, resolved deployments, YAML text.

Everything here is plain data (no I/O, no imports from other fleetwatch packages) so the
generators in :mod:`.sidecar`, :mod:`.monitors` and :mod:`.keda` stay pure functions of
their arguments and their output is byte-for-byte deterministic.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from fleetwatch.alerts.render import header
from fleetwatch.files import BlockDumper

#: Name of the sidecar container, its port and its config volume in every pod.
CONTAINER = "fleetwatch"
PORT_NAME = "fleetwatch"
#: Name of the OTLP/HTTP trace receiver's port (``traces:`` configured).
OTLP_PORT_NAME = "otlp-http"
VOLUME = "fleetwatch-config"
CONFIG_DIR = "/etc/fleetwatch"
#: The sidecar's state volume (an ``emptyDir``: it outlives a container restart, not the
#: pod) and where it is mounted (``state_dir`` in the pod's configuration).
STATE_VOLUME = "fleetwatch-state"
STATE_DIR = "/var/lib/fleetwatch"
#: Seconds the pod's termination grace period leaves beyond the sidecar's drain.
GRACE_MARGIN_SECONDS = 15
#: The volume of the OTLP receiver's authentication Secret (token or TLS files).
OTLP_AUTH_VOLUME = "fleetwatch-otlp-auth"
#: Pod labels the patch adds: every sidecar pod, and the pods of one Deployment.
SIDECAR_LABEL = "fleetwatch.io/sidecar"
DEPLOYMENT_LABEL = "fleetwatch.io/deployment"
#: Pod label of a disaggregated pool's role; Prometheus copies it to the ``role`` label.
ROLE_LABEL = "fleetwatch.io/role"
CONFIG_HASH_ANNOTATION = "fleetwatch.io/config-hash"
MODEL_ANNOTATION = "fleetwatch.io/model"
MANAGED = {"app.kubernetes.io/managed-by": "fleetwatch"}
SERVICE_LABELS = {"app.kubernetes.io/name": "fleetwatch",
                  "app.kubernetes.io/component": "sidecar"}
#: Startup-probe allowance (s) by registry latency tier when the entry gives none: LLM
#: engines load weights for minutes (vLLM production-stack allows the engine ~10 min).
STARTUP_SECONDS_BY_TIER = {"streaming": 600, "batch": 600}
DEFAULT_STARTUP_SECONDS = 120
STARTUP_PERIOD_SECONDS = 10

Trigger = Literal["prometheus", "metrics-api"]
Monitor = Literal["podmonitor", "servicemonitor"]


class ManifestError(ValueError):
    """Inputs that cannot make manifests; the message names the file and the field."""


@dataclass(frozen=True)
class Settings:
    """Options of ``fleetwatch manifests`` (the CLI's flags; defaults are the flags')."""

    image: str = "fleetwatch:0.1.0"
    namespace: str = "default"
    """Namespace of deployments whose registry entry names none."""
    monitoring_namespace: str = "monitoring"
    """PodMonitor, ServiceMonitor, dashboard ConfigMaps and the Alertmanager Secret."""
    release: str | None = None
    """``release`` label on the monitors (kube-prometheus-stack selects on it)."""
    monitor: Monitor = "podmonitor"
    """Which monitor the kustomization applies (both files are written)."""
    trigger: Trigger = "prometheus"
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    alertmanager_secret: str = "alertmanager-fleetwatch"
    cpu_request: str = "100m"
    memory_request: str = "256Mi"
    otlp_secret: str = "fleetwatch-otlp"
    """The Secret holding the OTLP receiver's token or TLS files (``traces.auth``),
    mounted at their folder when the receiver is exposed; you create it."""
    memory_limit: str = "1536Mi"
    """The sidecar container's memory limit: its RSS peaks while it normalizes a large
    exposition, about 0.8–0.9 GB at 200,000 series (``benchmarks/bench_churn.py``), and the
    sidecar accepts up to ``scrape.max_series`` (250,000); a smaller limit would have the
    kubelet kill it there instead of serving. Lower it with ``scrape.max_series``."""


@dataclass(frozen=True)
class SidecarSpec:
    """One sidecar configuration (one ``--config`` file) as the pods will read it.

    ``name`` is a DNS label made from the file's stem; ``config_yaml`` is the file with
    ``registry: models.yaml`` and ``listen.address: 0.0.0.0``; ``port`` is its listen port
    and ``interval_seconds`` its scrape interval; ``otlp_port`` the OTLP/HTTP trace
    receiver's port (``traces.listen.port``, address ``0.0.0.0`` in the pod) when the
    configuration has a ``traces:`` section with ``auth`` — the only case in which the
    receiver is exposed beyond the pod — else None (it listens on loopback, for the
    engines of the pod); ``otlp_auth_dir`` the folder of the ``traces.auth`` files, where
    the Secret ``otlp_secret`` is mounted, when exposed; ``quotas_yaml`` the text of its
    quota file (``quotas: quotas.yaml`` in the pod's copy) when it names one, else None;
    ``drain_seconds`` its ``shutdown.drain_seconds``; ``state`` whether it has a
    ``state_dir`` (:data:`STATE_DIR` in the pod); ``pod_env`` whether it reads
    ``POD_NAME``/``POD_NAMESPACE`` (``slo.recover.match``); ``role`` its targets' role
    (prefill, decode or both).
    """

    name: str
    source: str
    config_yaml: str
    port: int
    interval_seconds: float
    otlp_port: int | None = None
    quotas_yaml: str | None = None
    otlp_auth_dir: str | None = None
    drain_seconds: float = 0.0
    state: bool = False
    pod_env: bool = False
    role: str = "both"
    """Its targets' role in disaggregated serving (``SidecarConfig.role``)."""


@dataclass(frozen=True)
class Deployment:
    """A registry entry's ``deployment:`` block, resolved (times in seconds)."""

    name: str
    namespace: str
    model: str
    version: str | None
    """The entry's exact version (None for any version or a version glob)."""
    other_versions: tuple[str, ...]
    """Exact versions of the same model deployed by other entries (left out of this
    one's signal when ``version`` is None: a canary scales on its own load)."""
    sidecar: SidecarSpec
    latency_tier: str
    min_replicas: int
    max_replicas: int
    startup_seconds: int
    polling_seconds: int
    cooldown_seconds: int
    scale_down_stabilization_seconds: int
    where: str = field(default="")
    """``models.yaml: models[2] (name 'ranker')`` for messages."""
    role: str = "both"
    """The pool's role in disaggregated serving: ``prefill``, ``decode`` or ``both``."""


def dns_label(text: str) -> str:
    """``text`` lower-cased, runs of other characters as ``-``, trimmed (may be empty)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-")


def startup_seconds(explicit: int | None, tier: str) -> int:
    """The startup-probe allowance: the entry's own, else its tier's default."""
    if explicit is not None:
        return explicit
    return STARTUP_SECONDS_BY_TIER.get(tier, DEFAULT_STARTUP_SECONDS)


def startup_failure_threshold(seconds: int) -> int:
    """Probe failures allowed so ``period × threshold`` covers ``seconds``."""
    return max(1, math.ceil(seconds / STARTUP_PERIOD_SECONDS))


def dump(docs: list[dict[str, Any]], sources: list[str]) -> str:
    """YAML text of ``docs`` (one document each, keys in insertion order), with a header."""
    body = yaml.dump_all(docs, Dumper=BlockDumper, sort_keys=False, allow_unicode=True,
                         default_flow_style=False, width=100, explicit_start=True)
    return header("fleetwatch manifests", sources) + body
