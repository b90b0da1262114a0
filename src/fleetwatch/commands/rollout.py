"""The rollout commands — ``fleetwatch rollout plan``, ``fleetwatch compare``,
``fleetwatch baseline record``, ``fleetwatch warmup`` — as click commands the CLI
registers (:data:`ROLLOUT_COMMANDS`); thin like :mod:`fleetwatch.cli`: options, a call into
:mod:`fleetwatch.gpu.plan`, :mod:`fleetwatch.rollout` (:mod:`~fleetwatch.rollout.compare`,
:mod:`~fleetwatch.rollout.render`, :mod:`~fleetwatch.rollout.baseline`), or the command
layer's readers (:mod:`.compare`: each side's SLIs; :mod:`.warmup`), errors mapped to
exit codes (2 bad input: an unknown model, version or file; 1 a runtime failure:
Prometheus cannot answer, a warm-up cannot complete, the candidate would not fit).

``rollout plan --model M --candidate V`` prints the predicted GPU memory peak with both
versions loaded, the arithmetic line by line with each figure's source; exit 1 when it
would not fit. ``compare`` prints the comparison as a table (or ``--json``); its exit code
does not depend on the verdict.
"""

from __future__ import annotations

from typing import Any

import click

from fleetwatch.commands.common import EXIT_RUNTIME
from fleetwatch.commands.common import fail as _fail
from fleetwatch.commands.common import registry_or_fail as _registry
from fleetwatch.commands.common import slo_file_or_fail as _slo_file
from fleetwatch.commands.gpu_inputs import gpu_options, load_assessment
from fleetwatch.gpu.plan import PlanError, render_plan, rollout_plan
from fleetwatch.sidecar.config import ConfigError, load_config


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
        _fail(str(exc))
    click.echo(render_plan(p), nl=False)
    if not p.fits:
        raise SystemExit(EXIT_RUNTIME)


def _source_options(f: Any) -> Any:
    """The options saying where ``compare`` and ``baseline record`` read the SLIs."""
    opts = [
        click.option("--model", required=True, help="The model (its served name)."),
        click.option("--prometheus", "prom_url", default=None,
                     help="Prometheus base URL that scrapes the sidecars."),
        click.option("--range", "rng", default=None,
                     help="With --prometheus: counts over this range (e.g. 1h) instead of "
                          "since the sidecars started."),
        click.option("--timeout", type=float, default=10.0, show_default=True,
                     help="Seconds per Prometheus query."),
        click.option("--slos", "slos_path", type=click.Path(dir_okay=False), default=None,
                     help="SLO file: replay captures with it; with --prometheus, the "
                          "objectives."),
        click.option("--registry", "registry_path", type=click.Path(dir_okay=False),
                     default=None, help="Model registry (for the SLOs' selectors)."),
        click.option("--interval", type=float, default=None,
                     help="Seconds between captures (default: the <unix_ms> in each name)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _sources(model: str, prom_url: str | None, rng: str | None, timeout: float,
             slos_path: str | None, registry_path: str | None, interval: float | None,
             **captures: tuple[str, ...]) -> Any:
    from fleetwatch.commands.compare import Sources

    return Sources(model, prom_url, rng, timeout, _slo_file(slos_path) if slos_path else None,
                   _registry(registry_path) if registry_path else None, interval,
                   captures.get("captures", ()), captures.get("baseline_captures", ()),
                   captures.get("candidate_captures", ()))


@click.command()
@_source_options
@click.option("--baseline-version", default=None, help="The baseline's model version.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), default=None,
              help="A baseline file (fleetwatch baseline record) instead of a live version.")
@click.option("--candidate-version", required=True, help="The candidate's model version.")
@click.option("--baseline-backend", default=None,
              help="The baseline's backend (engine), when several serve the version.")
@click.option("--candidate-backend", default=None,
              help="The candidate's backend (engine), when several serve the version.")
@click.option("--captures", multiple=True, help="Captures (files or folders) holding both "
              "versions; repeatable.")
@click.option("--baseline-captures", multiple=True, help="Captures of the baseline.")
@click.option("--candidate-captures", multiple=True, help="Captures of the candidate.")
@click.option("--min-events", type=click.FloatRange(min=1), default=30, show_default=True,
              help="Events per band and side below which a band is 'not enough data'.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.05, show_default=True, help="Significance level over all bands.")
@click.option("--margin", type=click.FloatRange(0, 1), default=None,
              help="Smallest good-ratio difference that counts (default: half the SLO's "
                   "error budget).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--shadow", is_flag=True,
              help="The candidate receives a mirrored copy of the baseline's requests, its "
                   "responses discarded: the same comparison, plus the mirror's coverage.")
def compare(baseline_version: str | None, baseline_file: str | None, candidate_version: str,
            baseline_backend: str | None, candidate_backend: str | None, min_events: float,
            alpha: float, margin: float | None, as_json: bool, shadow: bool,
            **source: Any) -> None:
    """Compare a candidate version (or engine) of a model with a baseline, SLO by SLO and
    concurrency band by band: better, same, worse or not enough data, and the bands that
    drive it (exit 2 for an unknown model or version, 1 when Prometheus cannot answer).
    With --shadow the candidate's traffic is a mirrored copy
    (:mod:`fleetwatch.governance.shadow`): same verdicts, and how much the mirror delivered.
    \f
    Many parameters: one per option of ``fleetwatch compare``, passed by click."""
    from fleetwatch.commands.compare import CompareInputError
    from fleetwatch.commands.prometheus import PrometheusError
    from fleetwatch.rollout.baseline import BaselineError, load, side_name
    from fleetwatch.rollout.compare import Settings
    from fleetwatch.rollout.compare import compare as run_compare
    from fleetwatch.rollout.render import render, to_json

    if (baseline_version is None) == (baseline_file is None):
        _fail("give --baseline-version V or --baseline FILE (one of them)")
    try:
        src = _sources(**source)
        if baseline_file is not None:
            base = load(baseline_file)
            if base.model != source["model"]:
                _fail(f"{baseline_file}: model: the baseline is of model {base.model!r}, "
                      f"not {source['model']!r}")
            base_name, base_side = base.name, base.summaries()
        else:
            assert baseline_version is not None
            base_side = src.side("baseline", baseline_version, baseline_backend)
            base_name = side_name(source["model"], baseline_version, baseline_backend)
        cand_side = src.side("candidate", candidate_version, candidate_backend)
        cand_name = side_name(source["model"], candidate_version, candidate_backend)
        result = run_compare(source["model"], base_name, cand_name, base_side, cand_side,
                             Settings(min_events, alpha, margin))
    except BaselineError as exc:
        _fail(str(exc))
    except (CompareInputError, ValueError) as exc:
        _fail(exc.format_message() if isinstance(exc, CompareInputError) else str(exc))
    except PrometheusError as exc:
        _fail(str(exc), code=1)
    if not shadow:
        click.echo(to_json(result) if as_json else render(result))
        return
    from fleetwatch.governance import shadow as mirror

    cov = mirror.coverage(base_side, cand_side)
    if as_json:
        import json

        doc = json.loads(to_json(result))
        doc["shadow"] = [{"slo": c.slo, "baseline_events": c.baseline_events,
                          "candidate_events": c.candidate_events, "coverage": c.share}
                         for c in cov]
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        click.echo(render(result) + "\n" + mirror.render(cov))


@click.group()
def baseline() -> None:
    """Baselines: a model version's per-band SLI summary, stored to compare against."""


@baseline.command("record")
@_source_options
@click.option("--version", "model_version", required=True, help="The model version.")
@click.option("--backend", default=None,
              help="The backend (engine), when several serve the version.")
@click.option("--captures", multiple=True, help="Captures (files or folders); repeatable.")
@click.option("--out", required=True, type=click.Path(),
              help="The baseline YAML file to write.")
def baseline_record(model_version: str, backend: str | None, out: str,
                    **source: Any) -> None:
    """Record a model version's per-band SLI summary (from Prometheus or a replay of
    captures) as a versioned YAML baseline (exit 2 for an unknown model or version)."""
    from fleetwatch.commands.compare import CompareInputError
    from fleetwatch.commands.prometheus import PrometheusError
    from fleetwatch.rollout.baseline import record

    try:
        src = _sources(**source)
        src.backend_option["baseline"] = "--backend"
        summaries = src.side("baseline", model_version, backend)
        written = record(summaries, src.describe("baseline"), out)
    except CompareInputError as exc:
        _fail(exc.format_message())
    except PrometheusError as exc:
        _fail(str(exc), code=1)
    except OSError as exc:
        _fail(f"--out {out}: cannot write: {exc.strerror or exc}", code=1)
    bands = sum(len(s.bands) for s in written.slos)
    click.echo(f"wrote {out}: model {written.model} version {written.model_version!r} "
               f"({written.backend}), {len(written.slos)} SLO"
               f"{'s' if len(written.slos) != 1 else ''}, {bands} band{'s' if bands != 1 else ''}",
               err=True)


@click.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="Sidecar configuration YAML (its registry has the warm-up specs).")
@click.option("--model", default=None, help="Only this model (default: every model with "
              "a warm-up spec whose server the configuration names).")
@click.option("--version", "model_version", default="", help="The model version (Triton).")
def warmup(config_path: str, model: str | None, model_version: str) -> None:
    """Send each model's registry warm-up set to its server and print the first and last
    latencies (exit 1 when a warm-up cannot complete, 2 for an unknown model)."""
    from fleetwatch.commands.warmup import WarmupError, WarmupInputError, run_warmups

    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        _fail(str(exc))
    registry = _registry(cfg.registry, f"{config_path}: registry")
    try:
        run_warmups(cfg, registry, model, model_version, click.echo, config_path)
    except WarmupInputError as exc:
        _fail(str(exc))
    except WarmupError as exc:
        _fail(str(exc), code=1)


#: The commands :mod:`fleetwatch.cli` adds to ``fleetwatch``.
ROLLOUT_COMMANDS = (rollout, compare, baseline, warmup)


def _add_governance_commands() -> None:
    """``rollout status`` and ``rollout analysis`` (:mod:`.rollout_status`)."""
    from fleetwatch.commands.rollout_status import analysis, status

    rollout.add_command(status)
    rollout.add_command(analysis)


_add_governance_commands()
