"""Kubernetes manifests from the sidecar configuration, the registry and the SLO file
(``fleetwatch manifests``): the sidecar's ConfigMap, container and Deployment patch, its
Service, PodMonitor/ServiceMonitor, KEDA ScaledObjects, and the existing PrometheusRule,
dashboard ConfigMaps and Alertmanager Secret, with a kustomization. Pure and
deterministic: :func:`build` maps the inputs to ``{relative path: text}``; see
docs/deploy.md."""

from fleetwatch.manifests.bundle import Inputs, build, deployments, load_inputs
from fleetwatch.manifests.common import ManifestError, Settings

__all__ = ["Inputs", "ManifestError", "Settings", "build", "deployments", "load_inputs"]
