"""Everything ``fleetwatch manifests`` writes, from the input files.

:func:`load_inputs` reads and validates the files (the only reading); :func:`build` is
pure (``{relative path: text}``, byte-for-byte deterministic); ``fleetwatch.files.write_tree``
writes.

This module is the only one of :mod:`fleetwatch.manifests` importing other fleetwatch
packages (configuration, registry, SLO file, and the existing generators of the
PrometheusRule, dashboards and Alertmanager configuration, through their public
functions).

Output files (``DIR/``):

=============================  ========================================================
``kustomization.yaml``         the resources below (one monitor kind, ``--monitor``)
``sidecar-configmaps.yaml``    ``fleetwatch-<config>`` ConfigMap per namespace in use
``patches/<ns>/<name>.yaml``   strategic-merge patch adding the sidecar to a Deployment
``services.yaml``              ``<deployment>-fleetwatch`` Services
``podmonitor.yaml``            prometheus-operator PodMonitor
``servicemonitor.yaml``        the ServiceMonitor variant (over the Services)
``scaledobjects.yaml``         a KEDA ScaledObject per deployment
``prometheusrule.yaml``        ``fleetwatch rules`` as a PrometheusRule
``grafana-dashboards.yaml``    ``fleetwatch dashboards``' ConfigMaps
``alertmanager-secret.yaml``   ``fleetwatch alertmanager`` in a Secret (with --receivers)
``prometheus-scrape.yaml``     plain Prometheus ``scrape_configs`` (no operator)
=============================  ========================================================
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

# Imports from other fleetwatch packages (alerts, config, dashboards, labels, slo): the
# only ones in fleetwatch.manifests; their paths may move.
from fleetwatch.alerts.generate import (
    OPERATOR_FILE,
    AlertmanagerConfigError,
    build_alertmanager_file,
    build_rules,
)
from fleetwatch.alerts.generate import InputError as AlertInputError
from fleetwatch.alerts.generate import load_inputs as load_alert_inputs
from fleetwatch.dashboards import generate as generate_dashboards
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.manifests import keda, monitors, sidecar
from fleetwatch.manifests.common import (
    CONFIG_DIR,
    STATE_DIR,
    Deployment,
    ManifestError,
    Settings,
    SidecarSpec,
    dns_label,
    dump,
    startup_seconds,
)
from fleetwatch.sidecar.config import ConfigError, SidecarConfig, load_config
from fleetwatch.slo.spec import SLOFile
from fleetwatch.specfile import load_yaml, read_text

DASHBOARDS_FILE = "kubernetes/grafana-dashboards-configmaps.yaml"


@dataclass(frozen=True)
class SidecarFile:
    """One ``--config`` file: its path's base name, the validated configuration and the
    parsed YAML mapping (rewritten for the pod by :func:`sidecar_spec`)."""

    source: str
    config: SidecarConfig
    data: dict[str, Any]


@dataclass(frozen=True)
class Inputs:
    """The validated input files and their text (ConfigMaps carry the files verbatim)."""

    sidecars: tuple[SidecarFile, ...]
    registry: Registry
    registry_source: str
    registry_text: str
    slos: SLOFile
    slos_source: str
    slos_text: str
    alerting: Any  # fleetwatch.alerts.config.AlertingConfig
    receivers_source: str | None


def _read(path: str | Path, named_by: str = "") -> str:
    """The text of ``path``; `ManifestError` naming it (after ``named_by``, the file and
    field that name it, when given) when it cannot be read."""
    try:
        return read_text(path, ManifestError)
    except ManifestError as exc:
        raise ManifestError(f"{named_by}{exc}") from None


def load_inputs(config_paths: list[str], registry_path: str, slos_path: str,
                receivers_path: str | None) -> Inputs:
    """Read and validate every input; raise :class:`ManifestError` naming file and field."""
    if not config_paths:
        raise ManifestError("no --config: give the sidecar configuration file")
    sidecars = []
    for p in config_paths:
        try:
            cfg = load_config(p)
        except ConfigError as exc:
            raise ManifestError(str(exc)) from None
        data = load_yaml(_read(p))  # the same reading load_config validated: a mapping
        assert isinstance(data, dict)
        sidecars.append(SidecarFile(Path(p).name, cfg, data))
    try:
        registry, slos, alerting = load_alert_inputs(registry_path, slos_path, receivers_path)
    except AlertInputError as exc:
        raise ManifestError(str(exc)) from None
    assert slos is not None
    return Inputs(tuple(sidecars), registry, Path(registry_path).name, _read(registry_path),
                  slos, Path(slos_path).name, _read(slos_path), alerting,
                  Path(receivers_path).name if receivers_path else None)


def sidecar_spec(f: SidecarFile) -> SidecarSpec:
    """The pod's view of one configuration: ``registry: models.yaml`` (the ConfigMap's
    copy; ``quotas: quotas.yaml`` likewise when it names a quota file), listening on every
    address of the pod, at a fixed port (and so does the OTLP trace receiver when
    ``traces:`` is configured with ``auth``, on a port of its own; without ``auth`` it
    stays on its loopback address, :func:`_otlp_exposure`); ``state_dir`` is the pod's
    state volume (:data:`~fleetwatch.manifests.common.STATE_DIR`)."""
    name = dns_label(Path(f.source).stem)
    if not name:
        raise ManifestError(f"{f.source}: the file name gives no Kubernetes name; rename it "
                            "(letters or digits), e.g. sidecar.yaml")
    if f.config.listen.port == 0:
        raise ManifestError(f"{f.source}: field 'listen.port': 0 (any free port) cannot be "
                            "probed or scraped in a pod; give a fixed port, e.g. 9810")
    data = dict(f.data)
    data["listen"] = {**(data.get("listen") or {}), "address": "0.0.0.0",
                      "port": f.config.listen.port}
    data["registry"] = "models.yaml"
    quotas_text = None
    if f.config.quotas:  # load_config resolved it against the file's folder
        quotas_text = _read(f.config.quotas, f"{f.source}: field 'quotas': ")
        data["quotas"] = "quotas.yaml"
    otlp_port, auth_dir = _otlp_exposure(f)
    if otlp_port is not None:  # authenticated: reached through the pod's port
        data["traces"] = {**(data.get("traces") or {}),
                          "listen": {**((data.get("traces") or {}).get("listen") or {}),
                                     "address": "0.0.0.0", "port": otlp_port}}
    if f.config.state_dir is not None:  # the pod's state volume
        data["state_dir"] = STATE_DIR
    match = f.config.slo.recover.match.values()
    pod_env = any(var in v for v in match for var in ("${POD_NAME}", "${POD_NAMESPACE}"))
    text = (f"# {f.source} for the pod (fleetwatch manifests): registry and slos are the "
            "files beside it.\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return SidecarSpec(name, f.source, text, f.config.listen.port,
                       f.config.scrape.interval_seconds, otlp_port, quotas_text,
                       otlp_auth_dir=auth_dir, drain_seconds=f.config.shutdown.drain_seconds,
                       state=f.config.state_dir is not None, pod_env=pod_env,
                       role=f.config.role)


def _otlp_exposure(f: SidecarFile) -> tuple[int | None, str | None]:
    """``(port, folder of the auth files)`` of a trace receiver exposed beyond the pod —
    only one with ``traces.auth`` is — else ``(None, None)``: without auth it keeps its
    loopback address, which the engines of the pod reach. Errors name the field: port 0
    (the engines need a fixed port) or the sidecar's own port, auth files that are not
    absolute paths in one folder (the Secret is mounted there) or that are in the
    ConfigMap's folder."""
    traces = f.config.traces
    if traces is None:
        return None, None
    port = traces.listen.port
    if port == 0:
        raise ManifestError(f"{f.source}: field 'traces.listen.port': 0 (any free port) "
                            "cannot be sent to in a pod; give a fixed port, e.g. 4318")
    if port == f.config.listen.port:
        raise ManifestError(f"{f.source}: field 'traces.listen.port': {port} is "
                            "also listen.port; give the trace receiver its own, e.g. 4318")
    if traces.auth is None:
        return None, None
    files = traces.auth.files()
    dirs = {posixpath.dirname(p) for p in files}
    if not all(posixpath.isabs(p) for p in files) or len(dirs) != 1 \
            or dirs == {CONFIG_DIR}:
        raise ManifestError(f"{f.source}: field 'traces.auth': the token and TLS files must "
                            "be absolute paths in one folder other than "
                            f"{CONFIG_DIR} (the Secret is mounted there), e.g. "
                            "/etc/fleetwatch-otlp/token; got " + ", ".join(files))
    return port, dirs.pop()


def _selected(slos: SLOFile, entry: ModelEntry, model: str, role: str = "both") -> list[str]:
    """Names of the SLOs whose selector covers ``model`` with ``entry``'s team and tier,
    judged on a pool of ``role`` (the SLO engine's rule: every given criterion holds)."""
    out = []
    for s in slos.slos:
        sel = s.selector
        if (sel.covers_role(role)
                and (not sel.models or any(fnmatch.fnmatchcase(model, g) for g in sel.models))
                and (not sel.teams or entry.team in sel.teams)
                and (not sel.latency_tiers or entry.latency_tier in sel.latency_tiers)):
            out.append(s.name)
    return out


def deployments(inputs: Inputs, settings: Settings) -> list[Deployment]:
    """The registry entries with a ``deployment:`` block, resolved, in registry order.

    Errors (naming the registry file, the entry and the field): no entry has a
    deployment; an unknown or missing ``sidecar``; two entries deploy the same
    namespace/name; no SLO selects the deployed model (its sidecar would export no
    concurrency signal to scale on).
    """
    specs: dict[str, SidecarSpec] = {}
    for f in inputs.sidecars:
        spec = sidecar_spec(f)
        if spec.name in specs:
            raise ManifestError(f"{f.source}: gives the same name {spec.name!r} as "
                                f"{specs[spec.name].source}; rename one of them")
        specs[spec.name] = spec
    out: list[Deployment] = []
    seen: dict[tuple[str, str], str] = {}
    for i, e in enumerate(inputs.registry.entries):
        for d in e.deployment_specs:
            where = f"{inputs.registry_source}: models[{i}] (name {e.name!r})"
            if d.sidecar is None:
                if len(specs) > 1:
                    raise ManifestError(
                        f"{where}: field 'deployment.sidecar': required with several "
                        f"--config files (one of: {', '.join(specs)})")
                spec = next(iter(specs.values()))
            elif d.sidecar in specs:
                spec = specs[d.sidecar]
            else:
                raise ManifestError(
                    f"{where}: field 'deployment.sidecar': {d.sidecar!r} is no --config "
                    f"file's name (known: {', '.join(specs)})")
            ns = d.namespace or settings.namespace
            key = (ns, d.name)
            if key in seen:
                raise ManifestError(
                    f"{where}: field 'deployment.name': Deployment {ns}/{d.name} is already "
                    f"deployed by {seen[key]}")
            seen[key] = where
            model = e.deployed_model
            assert model is not None
            if spec.role != d.role:
                raise ManifestError(
                    f"{where}: field 'deployment.role': {d.role!r}, but the targets of "
                    f"{spec.source} give role {spec.role!r}; a pool's sidecar judges the "
                    "SLOs of its own role")
            if not _selected(inputs.slos, e, model, d.role):
                raise ManifestError(
                    f"{where}: field 'deployment': no SLO in {inputs.slos_source} selects "
                    f"model {model!r} (team {e.team!r}, tier {e.latency_tier!r}); its sidecar "
                    "would export no concurrency signal to scale on")
            exact = e.version if e.version and not set("*?[") & set(e.version) else None
            out.append(Deployment(
                name=d.name, namespace=ns, model=model, version=exact, other_versions=(),
                sidecar=spec,
                latency_tier=e.latency_tier, min_replicas=d.min_replicas,
                max_replicas=d.max_replicas,
                startup_seconds=startup_seconds(d.startup_seconds, e.latency_tier),
                polling_seconds=d.polling_seconds, cooldown_seconds=d.cooldown_seconds,
                scale_down_stabilization_seconds=d.scale_down_stabilization_seconds,
                where=where, role=d.role))
    _one_kind_of_pool(out)
    exact_versions: dict[str, set[str]] = {}
    for dep in out:
        if dep.version is not None:
            exact_versions.setdefault(dep.model, set()).add(dep.version)
    out = [replace(dep, other_versions=tuple(sorted(exact_versions.get(dep.model, set())
                                                     - {dep.version})))
           for dep in out]
    if not out:
        raise ManifestError(f"{inputs.registry_source}: no entry has a 'deployment:' block; "
                            "nothing to deploy (see docs/deploy.md)")
    return out


def _one_kind_of_pool(deps: list[Deployment]) -> None:
    """Refuse a model deployed both whole (``role: both``) and disaggregated: its pools'
    signals are told apart by ``role``, a whole-request Deployment's is not."""
    roles: dict[str, dict[str, str]] = {}
    for dep in deps:
        roles.setdefault(dep.model, {}).setdefault(dep.role, dep.where)
    for model, by_role in roles.items():
        if "both" in by_role and len(by_role) > 1:
            pooled = next(w for r, w in by_role.items() if r != "both")
            raise ManifestError(
                f"{by_role['both']}: field 'deployment': model {model!r} is also deployed "
                f"as a prefill/decode pool by {pooled}; deploy it one way")


def _sources(inputs: Inputs) -> list[str]:
    names = [f.source for f in inputs.sidecars] + [inputs.registry_source, inputs.slos_source]
    return names + ([inputs.receivers_source] if inputs.receivers_source else [])


def _alerting(inputs: Inputs, settings: Settings) -> Any:
    """The alerting configuration with the PrometheusRule in the monitoring namespace
    when the receivers file names none."""
    cfg = inputs.alerting
    if cfg.prometheus_rule.namespace is None:
        meta = cfg.prometheus_rule.model_copy(
            update={"namespace": settings.monitoring_namespace})
        cfg = cfg.model_copy(update={"prometheus_rule": meta})
    return cfg


def build(inputs: Inputs, settings: Settings) -> tuple[dict[str, str], list[str]]:
    """``({relative path: text}, warnings)``; raises :class:`ManifestError`."""
    deps = deployments(inputs, settings)
    sources = _sources(inputs)
    cfg = _alerting(inputs, settings)
    job = cfg.platform.sidecar_job
    files: dict[str, str] = {}
    warnings: list[str] = []

    configmaps, hashes = [], {}
    for ns, spec in sorted({(d.namespace, d.sidecar.name): (d.namespace, d.sidecar)
                            for d in deps}.values(), key=lambda x: (x[0], x[1].name)):
        data = sidecar.config_data(spec, inputs.registry_text, inputs.slos_text)
        hashes[spec.name] = sidecar.config_hash(data)
        configmaps.append(sidecar.configmap(spec, ns, data))
    files["sidecar-configmaps.yaml"] = dump(configmaps, sources)
    for d in deps:
        files[f"patches/{d.namespace}/{d.name}.yaml"] = dump(
            [sidecar.deployment_patch(d, settings, hashes[d.sidecar.name])], sources)
    files["services.yaml"] = dump([sidecar.service(d) for d in deps], sources)
    files["podmonitor.yaml"] = dump([monitors.pod_monitor(deps, settings, job)], sources)
    files["servicemonitor.yaml"] = dump([monitors.service_monitor(deps, settings, job)],
                                        sources)
    files["scaledobjects.yaml"] = dump([keda.scaled_object(d, settings) for d in deps],
                                       sources)
    files["prometheus-scrape.yaml"] = dump([monitors.scrape_config(deps, job)], sources)

    rules = build_rules(inputs.registry, inputs.slos, cfg, sources, ("operator",))
    files["prometheusrule.yaml"] = rules[OPERATOR_FILE]
    dashboards = generate_dashboards(inputs.registry, inputs.slos,
                                     settings.monitoring_namespace)
    files["grafana-dashboards.yaml"] = dashboards[DASHBOARDS_FILE]
    resources = ["sidecar-configmaps.yaml", "services.yaml", f"{settings.monitor}.yaml",
                 "scaledobjects.yaml", "prometheusrule.yaml", "grafana-dashboards.yaml"]
    if inputs.receivers_source:
        try:
            text, am = build_alertmanager_file(inputs.registry, cfg, inputs.slos, sources)
        except AlertmanagerConfigError as exc:
            raise ManifestError(str(exc)) from None
        warnings.extend(am.warnings)
        files["alertmanager-secret.yaml"] = dump([{
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": settings.alertmanager_secret,
                         "namespace": settings.monitoring_namespace,
                         "labels": {"app.kubernetes.io/managed-by": "fleetwatch"}},
            "stringData": {"alertmanager.yaml": text},
        }], sources)
        resources.append("alertmanager-secret.yaml")
    files["kustomization.yaml"] = dump([{
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": resources,
    }], sources)
    return dict(sorted(files.items())), warnings

