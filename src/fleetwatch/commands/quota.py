"""``fleetwatch quota check FILE`` (validate a quota file) and ``fleetwatch quota usage``
(what each team holds against its quota, from captured expositions and a declared
placement: the sidecar's ``fleetwatch_quota_usage`` computed offline)."""

from __future__ import annotations

import click

from fleetwatch.commands.common import EXIT_RUNTIME, fail
from fleetwatch.commands.gpu_inputs import gpu_options, load_assessment
from fleetwatch.gpu.assess import Assessment
from fleetwatch.gpu.policy import violations
from fleetwatch.gpu.quota import GPU_MEMORY, RESOURCES, QuotaError, load_quotas
from fleetwatch.labels.registry import Registry
from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.wording import counted


@click.group()
def quota() -> None:
    """Team quotas on shared GPUs: GPUs, GPU memory, instances (docs/gpus.md)."""


@quota.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
def check(file: str) -> None:
    """Validate a quota file (exit 2 naming the file, team and field)."""
    try:
        q = load_quotas(file)
    except QuotaError as exc:
        fail(str(exc))
    caps = sum(len(t.models) for t in q.teams.values())
    click.echo(f"{file}: ok ({counted(len(q.teams), 'team')}, "
               f"{counted(caps, 'per-model cap')})")


@quota.command("usage")
@gpu_options
@click.option("--quotas", "quotas_path", type=click.Path(dir_okay=False),
              help="Quota file (default: the configuration's quotas:).")
@click.option("--served-only", is_flag=True,
              help="Count only the models the captures serve (what a sidecar with these "
                   "targets exports); default: every placed model.")
def usage(config_path: str | None, registry_path: str | None, captures: tuple[str, ...],
          triton_configs: tuple[str, ...], triton_stats: tuple[str, ...],
          quotas_path: str | None, served_only: bool) -> None:
    """Print each team's usage against its quota (exit 1 when a team is over quota; exit 2
    when there is neither a quota file nor a model to count)."""
    a = load_assessment(config_path, registry_path, captures, triton_configs, triton_stats,
                        quotas_path, served_only)
    counted_nothing = not (a.usage.teams or a.placement.gpus or a.feet or a.usage.unowned)
    if a.quotas is None and counted_nothing:
        fail("quota usage: nothing to report: no quota file (give --quotas FILE, or a "
             "--config whose quotas: names one) and no usage (no model on a GPU in the "
             "--config's placement: or in the --captures)")
    click.echo(render_usage(a), nl=False)
    if a.quotas is None:
        click.echo("fleetwatch: no quota file (the configuration has no quotas: and no "
                   "--quotas was given): usage only, no limits", err=True)
    elif counted_nothing:
        click.echo("fleetwatch: no usage counted: no model is on a GPU in a --config's "
                   "placement: or in the --captures, so every usage is 0 (limits only)",
                   err=True)
    if over_quota(a):
        raise SystemExit(1)


def over_quota(a: Assessment) -> list[str]:
    """``team resource`` (and ``team model resource``) pairs above their limit."""
    out: list[str] = []
    if a.quotas is None:
        return out
    for team, q in a.quotas.teams.items():
        used = a.usage.teams.get(team, {})
        out += [f"{team} {r}" for r, lim in q.limits().items() if used.get(r, 0.0) > lim]
        for model, cap in q.models.items():
            mu = a.usage.models.get((team, model), {})
            out += [f"{team} {model} {r}" for r, lim in cap.limits().items()
                    if mu.get(r, 0.0) > lim]
    return out


def _fmt(resource: str, v: float | None) -> str:
    if v is None:
        return "-"
    return f"{int(v):,}" if resource == GPU_MEMORY else f"{v:.3f}".rstrip("0").rstrip(".")


def render_usage(a: Assessment) -> str:
    """The usage table, per GPU how it was split, unowned models and unknown footprints."""
    lines = [f"{'team':<20} {'resource':<17} {'usage':>18} {'limit':>18}"]
    teams = sorted(set(a.usage.teams) | set(a.quotas.teams if a.quotas else ()))
    over = set(over_quota(a))
    for team in teams:
        q = a.quotas.teams.get(team) if a.quotas else None
        for r in RESOURCES:
            used = a.usage.teams.get(team, {}).get(r, 0.0)
            limit = q.limits()[r] if q else None
            flag = "  OVER QUOTA" if f"{team} {r}" in over else ""
            lines.append(f"{team:<20} {r:<17} {_fmt(r, used):>18} {_fmt(r, limit):>18}{flag}")
        for model, cap in sorted(q.models.items()) if q else ():
            for r, limit in cap.limits().items():
                used = a.usage.models.get((team, model), {}).get(r, 0.0)
                flag = "  OVER CAP" if f"{team} {model} {r}" in over else ""
                lines.append(f"{team + ' / ' + model:<20} {r:<17} {_fmt(r, used):>18} "
                             f"{_fmt(r, limit):>18}{flag}")
    for g in a.placement.gpus:
        lines.append(f"GPU {g.gpu_uuid}: split by {a.usage.split_by.get(g.gpu_uuid, '-')}; "
                     + ", ".join(f"{m.model} {m.model_version or '(any)'} ×{m.instances}"
                                 for m in g.models))
    for (m, v, u), f in sorted(a.feet.items()):
        lines.append(f"footprint {m} {v or '(any)'} on {u}: {f.bytes:,} B [{f.source}]")
    for m, v, u in a.usage.unknown_footprint:
        lines.append(f"footprint {m} {v or '(any)'} on {u}: unknown (declare "
                     "gpu_memory_bytes in the registry)")
    for m, v in a.usage.unowned:
        lines.append(f"model {m} (version {v!r}) has no team: no registry entry")
    for x in a.violations:
        lines.append(f"placement policy: {x.sentence()}")
    return "\n".join(lines) + "\n"


def check_quota_file(cfg: SidecarConfig, config_path: str) -> None:
    """Exit 2 (naming the configuration, the quota file, team and field) when the
    configuration's ``quotas:`` file does not load."""
    if cfg.quotas:
        try:
            load_quotas(cfg.quotas)
        except QuotaError as exc:
            fail("\n".join(f"{config_path}: quotas: {line}" for line in str(exc).splitlines()))


def check_config_gpus(cfg: SidecarConfig, registry: Registry, config_path: str) -> None:
    """``fleetwatch validate``'s GPU part: the quota file loads (exit 2 naming it) and the
    declared placement keeps the policy (each violation on stderr, exit 1)."""
    check_quota_file(cfg, config_path)
    found = violations(cfg.declared_placement(), registry)
    for x in found:
        click.echo(f"{config_path}: placement policy: {x.sentence()}", err=True)
    if found:
        fail(f"{config_path}: {len(found)} placement policy violation"
             f"{'s' if len(found) != 1 else ''} (declared placement:)", code=EXIT_RUNTIME)
