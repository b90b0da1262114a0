"""``fleetwatch rollout status`` and ``fleetwatch rollout analysis``: the step a model's
rollout is at and its gate (:mod:`fleetwatch.governance.steps`), and the gate as Argo
Rollouts and Flagger analysis templates (:mod:`fleetwatch.governance.analysis`).

``status`` reads each version's request rate from a Prometheus that scrapes the sidecars
(:data:`RATE_QUERY` over ``--range``), compares the candidate with the baseline as
``fleetwatch compare --prometheus`` does (over the same range), and, given the GPU inputs
of ``rollout plan`` (``--config`` …), computes the memory plan with both versions loaded.
Exit codes: 0 the gate to the next step passes (or the rollout is complete), 1 it does
not (or Prometheus cannot answer), 2 bad input (an unknown model or version).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from fleetwatch.commands.common import EXIT_RUNTIME, write_generated
from fleetwatch.commands.common import fail as _fail
from fleetwatch.commands.gpu_inputs import gpu_options, load_assessment
from fleetwatch.governance.analysis import (
    DEFAULT_ADDRESS,
    DEFAULT_COUNT,
    DEFAULT_NAME,
    GateSettings,
    yaml_files,
)
from fleetwatch.promql import string

if TYPE_CHECKING:  # the comparison's modules (numpy): imported when a command runs
    from fleetwatch.governance.steps import Gate, Step, VersionTraffic

#: Each version's request rate over ``{range}`` (req/s), summed over replicas and backends.
RATE_QUERY = ("sum by (model_version) "
              "(rate(modelserver_requests_total{{model={model}}}[{range}]))")
#: The largest rate taken from Prometheus (2^53, as the comparison's counts).
MAX_RATE = 2.0**53


def version_rates(prom: str, model: str, rng: str, timeout: float) -> dict[str, float]:
    """``{version: req/s}`` of every version of ``model`` with series over ``rng``."""
    from fleetwatch.commands.prometheus import Expected, query

    answer = query(prom, RATE_QUERY.format(model=string(model), range=rng), timeout,
                   Expected("a request rate (requests per second)", MAX_RATE))
    return {str(s["metric"].get("model_version", "")): float(s["value"][1]) for s in answer}


def _sides(rates: dict[str, float], baseline: str | None,
           candidate: str) -> tuple[VersionTraffic, VersionTraffic]:
    """The baseline (given, else the oldest other version seen) and the candidate."""
    from fleetwatch.governance.steps import VersionTraffic
    from fleetwatch.rollout.export import version_order


    if baseline is None:
        others = sorted((v for v in rates if v != candidate), key=version_order)
        baseline = others[0] if others else ""
    return (VersionTraffic(baseline, rates.get(baseline)),
            VersionTraffic(candidate, rates.get(candidate)))


def _comparison(model: str, base: str, cand: str, prom: str, rng: str, timeout: float,
                slos_path: str | None) -> Any:
    """The candidate against the baseline over ``rng`` (None: a side has no summaries)."""
    from fleetwatch.commands.common import slo_file_or_fail
    from fleetwatch.commands.compare import CompareInputError, Sources
    from fleetwatch.rollout.compare import compare as run_compare

    slos = slo_file_or_fail(slos_path) if slos_path else None
    src = Sources(model, prom, rng, timeout, slos, None, None, (), (), ())
    try:
        return run_compare(model, base, cand, src.side("baseline", base),
                           src.side("candidate", cand))
    except (CompareInputError, ValueError):
        return None


def _report(model: str, base: VersionTraffic, cand: VersionTraffic, at: Step,
            g: Gate) -> dict[str, Any]:
    return {"model": model, "baseline": {"version": base.version, "rate": base.rate},
            "candidate": {"version": cand.version, "rate": cand.rate},
            "step": at.name, "share": at.share, "next": g.to, "gate_passes": g.passes,
            "reasons": list(g.reasons)}


def _text(r: dict[str, Any]) -> str:
    def rate(side: dict[str, Any]) -> str:
        return "no series" if side["rate"] is None else f"{side['rate']:.3g} req/s"

    share = "" if r["share"] is None or r["step"] != "canary" else f" ({100 * r['share']:.0f}%)"
    lines = [f"model {r['model']}: step {r['step']}{share}",
             f"  baseline {r['baseline']['version'] or '-'}: {rate(r['baseline'])}",
             f"  candidate {r['candidate']['version']}: {rate(r['candidate'])}"]
    if r["next"] is None:
        lines.append("  gate: none (the rollout is complete)")
    else:
        lines.append(f"  gate to {r['next']}: {'passes' if r['gate_passes'] else 'BLOCKED'}")
    lines += [f"    {why}" for why in r["reasons"]]
    return "\n".join(lines)


@click.command("status")
@click.option("--model", required=True, help="The model (its served name).")
@click.option("--candidate-version", required=True, help="The version being rolled out.")
@click.option("--baseline-version", default=None,
              help="The version it replaces (default: the oldest other version seen).")
@click.option("--prometheus", "prom_url", required=True,
              help="Prometheus base URL that scrapes the sidecars.")
@click.option("--range", "rng", default="10m", show_default=True,
              help="The range over which rates and the comparison are read.")
@click.option("--shadow", is_flag=True, help="The candidate's traffic is a mirrored copy "
              "(a mirror and a real share look alike to Prometheus).")
@click.option("--slos", "slos_path", type=click.Path(dir_okay=False), default=None,
              help="SLO file: the objectives (the comparison's default margin).")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@gpu_options
def status(model: str, candidate_version: str, baseline_version: str | None, prom_url: str,
           rng: str, shadow: bool, slos_path: str | None, timeout: float, as_json: bool,
           **gpu: Any) -> None:
    """Which step a model's rollout is at (loaded, shadow, canary, full, old removed) and
    whether the gate to the next passes (exit 0 passes, 1 blocked, 2 bad input).
    \f
    Many parameters: one per option, passed by click."""
    from fleetwatch.commands.prometheus import PrometheusError
    from fleetwatch.governance.steps import StepError, gate, step
    from fleetwatch.gpu.plan import PlanError, rollout_plan

    try:
        rates = version_rates(prom_url, model, rng, timeout)
        base, cand = _sides(rates, baseline_version, candidate_version)
        at = step(base, cand, shadow)
        comparison = (_comparison(model, base.version, cand.version, prom_url, rng,
                                  timeout, slos_path) if base.present else None)
    except StepError as exc:
        _fail(f"model {model!r}: {exc} (versions seen over {rng}: "
              f"{', '.join(sorted(rates)) or 'none'})")
    except PrometheusError as exc:
        _fail(str(exc), code=EXIT_RUNTIME)
    fits = None
    if any(gpu.values()) and at.next not in (None, "old removed"):
        a = load_assessment(gpu["config_path"], gpu["registry_path"], gpu["captures"],
                            gpu["triton_configs"], gpu["triton_stats"])
        try:
            fits = rollout_plan(model, cand.version, a.placement, a.feet, a.gpus,
                                a.registry).fits
        except PlanError as exc:
            _fail(str(exc))
    g = gate(at, comparison, fits)
    report = _report(model, base, cand, at, g)
    click.echo(json.dumps(report, indent=2, sort_keys=True) if as_json else _text(report))
    if not g.passes:
        raise SystemExit(EXIT_RUNTIME)


@click.command("analysis")
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Folder to write argo-analysistemplate.yaml and "
                   "flagger-metrictemplate.yaml to.")
@click.option("--prometheus-address", default=DEFAULT_ADDRESS, show_default=True,
              help="The Prometheus the controllers query (in-cluster address).")
@click.option("--namespace", default=None, help="metadata.namespace of both templates.")
@click.option("--name", default=DEFAULT_NAME, show_default=True,
              help="metadata.name of both templates.")
@click.option("--count", type=click.IntRange(1, 1000), default=DEFAULT_COUNT,
              show_default=True,
              help="Argo: measurements, one a minute, before the analysis step completes.")
def analysis(out: str, prometheus_address: str, namespace: str | None, name: str,
             count: int) -> None:
    """Write the rollout gate as an Argo Rollouts AnalysisTemplate and a Flagger
    MetricTemplate (Prometheus provider; the query returns 0 pass, 1 wait, 2 worse)."""
    settings = GateSettings(name=name, namespace=namespace, address=prometheus_address,
                            count=count)
    write_generated(yaml_files(settings), out)
