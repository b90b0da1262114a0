"""``fleetwatch rollout plan --model M --candidate V``: the predicted GPU memory peak with
both versions loaded, the arithmetic line by line with each figure's source
(:mod:`fleetwatch.gpu.plan`); exit 1 when it would not fit, 2 for an unknown model or
version or bad input."""

from __future__ import annotations

import click

from fleetwatch.commands.common import EXIT_RUNTIME, fail
from fleetwatch.commands.gpu_inputs import gpu_options, load_assessment
from fleetwatch.gpu.plan import PlanError, render_plan, rollout_plan


@click.group()
def rollout() -> None:
    """Rollouts of a new model version."""


@rollout.command("plan")
@click.option("--model", required=True, help="The model to roll out.")
@click.option("--candidate", required=True, help="The candidate version (e.g. 2).")
@gpu_options
def plan(model: str, candidate: str, config_path: str | None, registry_path: str | None,
         captures: tuple[str, ...], triton_configs: tuple[str, ...],
         triton_stats: tuple[str, ...]) -> None:
    """Will the candidate version fit on the model's GPUs beside the current one?"""
    a = load_assessment(config_path, registry_path, captures, triton_configs, triton_stats)
    try:
        p = rollout_plan(model, candidate, a.placement, a.feet, a.gpus, a.registry)
    except PlanError as exc:
        fail(str(exc))
    click.echo(render_plan(p), nl=False)
    if not p.fits:
        raise SystemExit(EXIT_RUNTIME)
