"""Validation of generated Kubernetes objects against the real schemas, offline.

Core objects (ConfigMap, Secret, Service, Deployment) with ``kubernetes-validate`` (the
upstream OpenAPI schemas of Kubernetes :data:`K8S_VERSION`, strict: unknown fields are
errors); custom resources (KEDA ScaledObject, prometheus-operator PodMonitor,
ServiceMonitor, PrometheusRule) with ``jsonschema`` against the CRDs' ``openAPIV3Schema``
in ``tests/data/crds/`` (provenance in its SOURCES.md). The API server prunes unknown
fields of a custom resource silently; here they are errors too (``additionalProperties:
false`` is added wherever a schema lists ``properties`` and does not preserve unknown
fields), so a misspelt ``minReplicas`` fails instead of vanishing.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

CRD_DIR = Path(__file__).resolve().parents[1] / "data" / "crds"
K8S_VERSION = "1.33.0"
CORE = {("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("apps/v1", "Deployment")}


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def crd_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    """``{(apiVersion, kind): validator}`` for every served version of every CRD file."""
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                schema = _strict(copy.deepcopy(v["schema"]["openAPIV3Schema"]))
                cls = jsonschema.validators.validator_for(schema, jsonschema.Draft7Validator)
                out[(f"{group}/{v['name']}", kind)] = cls(schema)
    return out


def errors(doc: dict[str, Any]) -> list[str]:
    """Every schema error of one object (empty when valid); an object of a kind without
    a schema here is an error too."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CORE:
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return [f"{'.'.join(str(p) for p in exc.path)}: {exc.message}"]
        return []
    validator = crd_validators().get(key)  # type: ignore[arg-type]
    if validator is None:
        return [f"no schema for {key}"]
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))]
