"""The generator commands: ``dashboards``, ``rules``, ``alertmanager``, ``manifests``.

Each is pure on its inputs (files in, files out, deterministic) and needs no extra: they run
after ``pip install .`` alone (``tools/ci_no_extras.sh``). Those that write a folder say
``wrote N files to DIR``. Exit codes: 0 ok, 2 an input error naming the file and the field,
1 an output that cannot be written (an ``--out`` that is a file included), naming it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal, cast

import click

from fleetwatch import __version__
from fleetwatch.commands.common import (
    fail,
    registry_or_fail,
    slo_file_or_fail,
    write_generated,
    write_or_fail,
)


@click.command()
@click.option("--registry", "registry_path", required=True, type=click.Path(dir_okay=False),
              help="Model registry YAML (teams documented on the fleet dashboard).")
@click.option("--slos", "slos_path", required=True, type=click.Path(dir_okay=False),
              help="SLO file: one row per SLO on the SLO dashboard.")
@click.option("--out", "out_dir", required=True, type=click.Path(),
              help="Output directory (dashboards/, provisioning/, kubernetes/).")
@click.option("--namespace", default="monitoring", show_default=True,
              help="Namespace of the generated ConfigMaps.")
def dashboards(registry_path: str, slos_path: str, out_dir: str, namespace: str) -> None:
    """Generate the Grafana dashboards (fleet, model, SLOs, GPUs) and their provisioning."""
    from fleetwatch.dashboards import generate

    files = generate(registry_or_fail(registry_path), slo_file_or_fail(slos_path), namespace)
    write_generated(files, out_dir)



# -- alerts: generated rules and Alertmanager configuration (fleetwatch.alerts) -------------
@click.command()
@click.option("--registry", "registry_path", required=True, type=click.Path(dir_okay=False),
              help="Model registry YAML (owners of the model-not-ready alerts).")
@click.option("--slos", "slos_path", required=True, type=click.Path(dir_okay=False),
              help="SLO file (burn-rate recording rules and alerts).")
@click.option("--receivers", "receivers_path", type=click.Path(dir_okay=False),
              help="Alerting configuration: URLs, platform thresholds (defaults without it).")
@click.option("--out", "out_dir", required=True, type=click.Path(),
              help="Output directory.")
@click.option("--format", "fmt", type=click.Choice(["plain", "operator", "both"]),
              default="both", show_default=True,
              help="Plain rule files, a prometheus-operator PrometheusRule, or both.")
@click.option("--tests", is_flag=True,
              help="Also write promtool behaviour tests (promtool test rules).")
def rules(registry_path: str, slos_path: str, receivers_path: str | None, out_dir: str,
          fmt: str, tests: bool) -> None:
    """Generate Prometheus recording and alerting rules from the registry and SLO file."""
    from fleetwatch.alerts.behaviour import BehaviourTestError
    from fleetwatch.alerts.generate import InputError, build_rules, load_inputs, source_names

    try:
        registry, slos, cfg = load_inputs(registry_path, slos_path, receivers_path)
        assert slos is not None
        formats = ("plain", "operator") if fmt == "both" else (fmt,)
        not_covered: list[str] = []
        files = build_rules(registry, slos, cfg,
                            source_names(registry_path, slos_path, receivers_path),
                            formats, tests=tests and "plain" in formats,
                            not_covered=not_covered)
    except (InputError, BehaviourTestError) as exc:
        fail(str(exc))
    for case in not_covered:
        click.echo(f"fleetwatch: warning: behaviour tests do not cover {case}", err=True)
    write_generated(files, out_dir)


@click.command()
@click.option("--registry", "registry_path", required=True, type=click.Path(dir_okay=False),
              help="Model registry YAML (its teams are checked against the receivers).")
@click.option("--receivers", "receivers_path", required=True, type=click.Path(dir_okay=False),
              help="Alerting configuration: teams, default and receivers.")
@click.option("--slos", "slos_path", type=click.Path(dir_okay=False),
              help="SLO file: its burn tiers are inhibited (default: the Workbook catalog).")
@click.option("--out", "out_file", type=click.Path(allow_dash=True),
              default="-", show_default=True, help="Output file (- for stdout).")
def alertmanager(registry_path: str, receivers_path: str, slos_path: str | None,
                 out_file: str) -> None:
    """Generate the Alertmanager configuration: routes by team and severity, inhibitions."""
    from fleetwatch.alerts.generate import (
        AlertmanagerConfigError,
        InputError,
        build_alertmanager_file,
        load_inputs,
        source_names,
    )

    try:
        registry, slos, cfg = load_inputs(registry_path, slos_path, receivers_path)
        text, am = build_alertmanager_file(
            registry, cfg, slos, source_names(registry_path, slos_path, receivers_path))
    except InputError as exc:
        fail(str(exc))
    except AlertmanagerConfigError as exc:  # the receivers file lacks what it must hold
        fail(f"{receivers_path}: {exc}")
    for warning in am.warnings:
        click.echo(f"fleetwatch: warning: {warning}", err=True)
    if out_file == "-":
        sys.stdout.write(text)
        return
    path = Path(out_file)
    write_or_fail({path.name: text}, path.parent)
    click.echo(out_file)


# -- manifests: Kubernetes manifests (fleetwatch.manifests) ---------------------------------
@click.command()
@click.option("--config", "config_paths", required=True, multiple=True,
              type=click.Path(dir_okay=False),
              help="Sidecar configuration YAML (repeat for several kinds of pod; a registry "
                   "deployment picks one by file stem with deployment.sidecar).")
@click.option("--registry", "registry_path", required=True, type=click.Path(dir_okay=False),
              help="Model registry YAML: entries with a deployment: block are deployed.")
@click.option("--slos", "slos_path", required=True, type=click.Path(dir_okay=False),
              help="SLO file (mounted in the sidecars; rules and dashboards).")
@click.option("--receivers", "receivers_path", type=click.Path(dir_okay=False),
              help="Alerting configuration: adds the Alertmanager config Secret.")
@click.option("--out", "out_dir", required=True, type=click.Path(),
              help="Output directory (kustomization.yaml and the files it lists).")
@click.option("--image", default=f"fleetwatch:{__version__}", show_default=True,
              help="Sidecar image.")
@click.option("--namespace", default="default", show_default=True,
              help="Namespace of deployments whose registry entry names none.")
@click.option("--monitoring-namespace", default="monitoring", show_default=True,
              help="Namespace of the monitors, dashboards and Alertmanager Secret.")
@click.option("--release", default=None,
              help="release label on the monitors (kube-prometheus-stack's release name).")
@click.option("--monitor", type=click.Choice(["podmonitor", "servicemonitor"]),
              default="podmonitor", show_default=True,
              help="Which monitor kustomization.yaml applies (both files are written).")
@click.option("--trigger", type=click.Choice(["prometheus", "metrics-api"]),
              default="prometheus", show_default=True,
              help="KEDA trigger: the fleet-wide recording rule, or one sidecar's "
                   "/autoscaling/<model>.")
@click.option("--prometheus-url", default="http://prometheus-operated.monitoring.svc:9090",
              show_default=True, help="Prometheus that KEDA's Prometheus trigger queries.")
@click.option("--alertmanager-secret", default="alertmanager-fleetwatch", show_default=True,
              help="Name of the Alertmanager config Secret.")
@click.option("--otlp-secret", default="fleetwatch-otlp", show_default=True,
              help="Secret with the OTLP receiver's token or TLS files (traces.auth), "
                   "mounted at their folder; you create it.")
def manifests(config_paths: tuple[str, ...], registry_path: str, slos_path: str,
              receivers_path: str | None, out_dir: str, image: str, namespace: str,
              monitoring_namespace: str, release: str | None, monitor: str, trigger: str,
              prometheus_url: str, alertmanager_secret: str, otlp_secret: str) -> None:
    """Generate Kubernetes manifests: sidecar ConfigMap, container and Deployment patch,
    Service, PodMonitor/ServiceMonitor, KEDA ScaledObjects, PrometheusRule, dashboard
    ConfigMaps, Alertmanager Secret and a kustomization (docs/deploy.md).
    \f
    Many parameters: one per option of ``fleetwatch manifests``, passed by click."""
    from fleetwatch.manifests import ManifestError, Settings, build, load_inputs

    settings = Settings(image=image, namespace=namespace,
                        monitoring_namespace=monitoring_namespace, release=release,
                        monitor=cast(Literal["podmonitor", "servicemonitor"], monitor),
                        trigger=cast(Literal["prometheus", "metrics-api"], trigger),
                        prometheus_url=prometheus_url,
                        alertmanager_secret=alertmanager_secret, otlp_secret=otlp_secret)
    try:
        files, warnings = build(load_inputs(list(config_paths), registry_path, slos_path,
                                            receivers_path), settings)
    except ManifestError as exc:
        fail(str(exc))
    for warning in warnings:
        click.echo(f"fleetwatch: warning: {warning}", err=True)
    write_generated(files, out_dir)


GENERATORS = (dashboards, rules, alertmanager, manifests)
