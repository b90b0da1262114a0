"""What ``fleetwatch quota usage`` and ``fleetwatch rollout plan`` read: a sidecar
configuration (declared placement, registry, quota file), captured ``/metrics`` bodies of
Triton, vLLM and dcgm-exporter (one target each, the kind detected), and Triton's model
configuration and statistics documents (``GET /v2/models/<m>/config`` and ``…/stats``
saved as JSON; the model is the document's ``name``) — assessed offline like a sidecar
would (:func:`fleetwatch.gpu.assess.assess`).

Bad input (an unreadable file, a body of no known source, a JSON document without a model
name) is one ``fleetwatch: error: FILE: …`` line and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import click

from fleetwatch.commands.common import fail, registry_or_fail
from fleetwatch.gpu.assess import Assessment, assess
from fleetwatch.gpu.discover import scan_exposition
from fleetwatch.gpu.discovered import TargetFacts
from fleetwatch.gpu.quota import QuotaError, Quotas, load_quotas
from fleetwatch.labels.placement import Placement
from fleetwatch.sidecar.config import ConfigError, load_config

F = TypeVar("F", bound=Callable[..., object])


def gpu_options(f: F) -> F:
    """The shared options: ``--config``, ``--registry``, ``--captures``,
    ``--triton-config``, ``--triton-stats``."""
    for opt in reversed((
        click.option("--config", "config_path", type=click.Path(dir_okay=False),
                     help="Sidecar configuration: its placement:, registry and quotas."),
        click.option("--registry", "registry_path", type=click.Path(dir_okay=False),
                     help="Model registry (default: the configuration's)."),
        click.option("--captures", "captures", multiple=True,
                     type=click.Path(dir_okay=False),
                     help="A captured /metrics body of Triton, vLLM or dcgm-exporter "
                          "(repeat the option, one target each)."),
        click.option("--triton-config", "triton_configs", multiple=True,
                     type=click.Path(dir_okay=False),
                     help="A saved GET /v2/models/<m>/config document (repeatable)."),
        click.option("--triton-stats", "triton_stats", multiple=True,
                     type=click.Path(dir_okay=False),
                     help="A saved GET /v2/models/<m>/stats document (repeatable)."),
    )):
        f = opt(f)
    return f


def _read(path: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        fail(f"{path}: not UTF-8 text (byte {exc.start})")


def _json_by_model(paths: Sequence[str], what: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in paths:
        try:
            doc = json.loads(_read(p))
        except ValueError as exc:
            fail(f"{p}: not JSON: {exc}")
        name = doc.get("name") if isinstance(doc, dict) else None
        if name is None and isinstance(doc, dict) and isinstance(doc.get("model_stats"), list):
            names = {s.get("name") for s in doc["model_stats"] if isinstance(s, dict)}
            name = names.pop() if len(names) == 1 else None
        if not isinstance(name, str) or not name:
            fail(f"{p}: not a Triton {what} document (no model 'name')")
        out[name] = doc
    return out


def load_assessment(config_path: str | None, registry_path: str | None,
                    captures: Sequence[str], triton_configs: Sequence[str],
                    triton_stats: Sequence[str], quotas_path: str | None = None,
                    served_only: bool = False) -> Assessment:
    """Read every input (exit 2 with the file on bad input) and assess them; with
    ``served_only`` the usage counts only the models the captures serve (as a sidecar with
    those targets does), else every placed model (the fleet view of one file)."""
    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.parser import describe_if_not_metrics
    from fleetwatch.exporters.sources import TABLES, detect_kind

    declared, cfg_registry, cfg_quotas = Placement(), None, None
    if config_path:
        try:
            cfg = load_config(config_path)
        except ConfigError as exc:
            fail(str(exc))
        declared, cfg_registry, cfg_quotas = cfg.declared_placement(), cfg.registry, cfg.quotas
    registry = registry_or_fail(registry_path or cfg_registry)
    quotas: Quotas | None = None
    if quotas_path or cfg_quotas:
        try:
            quotas = load_quotas(quotas_path or cfg_quotas or "")
        except QuotaError as exc:
            fail(str(exc))
    configs = _json_by_model(triton_configs, "model configuration")
    stats = _json_by_model(triton_stats, "model statistics")
    states, targets = [], []
    for path in captures:
        text = _read(path)
        kind = detect_kind(text)
        if kind not in TABLES or kind == "unknown":
            why = describe_if_not_metrics(text) or "no Triton, vLLM or dcgm-exporter family"
            fail(f"{path}: not a /metrics body of a known source: {why}")
        n = Normalizer(TABLES[kind]).normalize(text)
        states.append(n)
        targets.append(TargetFacts(kind, {(m[0], m[1]) for m in n.models},
                                   scan_exposition(text),
                                   configs if kind == "triton" else {}))
    served = {m for t in targets for m, _v in t.models} if served_only else None
    return assess(declared, states, targets, registry, quotas, stats, served=served)
