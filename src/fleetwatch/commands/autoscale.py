"""``fleetwatch autoscale replay``: the advisory twin on a request trace — what each
autoscaling policy would have done with this traffic, and what it would have cost.

The replica model is fitted from captures of one real replica under a concurrency sweep
(``--captures``): they are replayed through the SLO engine twice, once with the user's
SLO file (the model's TTFT SLO: threshold, objective, the capacity at SLO the engine
learns — fleetwatch's signal divides by it) and once with two median-latency SLOs over
the same bands (TTFT and ITL against requests running: the engine's per-band latency
model, :mod:`fleetwatch.autoscale.replica`). The last capture gives the engine's KV
cache size (``modelserver_kv_cache_capacity_tokens``) and mean prompt (input tokens ÷
requests). The trace (Azure CSV or mooncake JSONL, by content) is cut to ``--segment``,
mapped with :func:`~fleetwatch.autoscale.trace.map_trace` and replayed under each policy
(:mod:`fleetwatch.autoscale.replay`).

Bad input — an unreadable trace or capture, a trace line that does not parse, captures
that give no replica model — is one ``fleetwatch: error: …`` line naming the file and
exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fleetwatch.autoscale.policies import POLICIES, policy
from fleetwatch.autoscale.trace import (
    Request,
    TraceError,
    TraceMapping,
    map_trace,
    read_azure_csv,
    read_mooncake_jsonl,
    segment,
)
from fleetwatch.commands.autoscale_trace import trace_command
from fleetwatch.commands.common import fail, registry_or_fail, slo_file_or_fail

if TYPE_CHECKING:  # the twin needs numpy (the SLO engine); the CLI imports this module
    from rich.console import Console

    from fleetwatch.autoscale.replay import PolicyResult, ReplayResult
    from fleetwatch.autoscale.replica import ReplicaModel
    from fleetwatch.labels.registry import Registry
    from fleetwatch.slo.spec import SLOFile, SLOSpec

EXAMPLE = """\b
Example, on the trace and the real-vLLM sweep in the repository:
  fleetwatch autoscale replay tests/data/workloads/AzureLLMInferenceTrace_code.csv \\
      --slos src/fleetwatch/demo/slos.yaml --captures tests/data/vllm-sweep/captures \\
      --segment 0:900 --itl-seconds 0.05
"""


def read_trace(path: Path) -> list[Request]:
    """The requests of a mooncake JSONL trace (its first non-blank line a JSON object) or
    else an Azure CSV (its header first); exit 2 naming the file and the line otherwise."""
    try:
        with path.open(encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
            f.seek(0)
            if first.lstrip().startswith("{"):
                return read_mooncake_jsonl(f)
            if first.lstrip().startswith("["):
                fail(f"{path}: line 1: a JSON array; a mooncake trace is JSONL, one object "
                     "per line")
            return read_azure_csv(f)  # names the header it expects if this is not it
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError:
        fail(f"{path}: not UTF-8 text")
    except TraceError as exc:
        fail(f"{path}: {exc}")


def capture_paths(given: Sequence[str]) -> list[Path]:
    """The capture files: each argument a file or a directory of ``*.prom`` files; exit 2
    for a path that does not exist or fewer than two captures."""
    out: list[Path] = []
    for g in given:
        p = Path(g)
        if not p.exists():
            fail(f"--captures {g}: no such file or directory")
        out.extend(sorted(p.glob("*.prom")) if p.is_dir() else [p])
    if len(out) < 2:
        fail(f"--captures {' '.join(given)}: need at least two captures of a sweep")
    return out


def ttft_slo(slos: SLOFile, rows: Sequence[dict[str, object]], model: str) -> SLOSpec:
    """The user's TTFT latency SLO that the replay judged for ``model``."""
    judged = {r.get("slo") for r in rows if r.get("model") == model}
    for spec in slos.slos:
        lat = spec.sli.latency
        if lat is not None and lat.metric == "ttft" and spec.name in judged:
            return spec
    fail(f"--slos: no TTFT latency SLO selects model {model!r} in the captures")


def fit_slos(spec: SLOSpec, model: str) -> SLOFile:
    """Two median-latency SLOs (TTFT, ITL) on ``model`` over ``spec``'s bands."""
    from fleetwatch.slo.spec import parse_slo_file

    bands = {"envelope": spec.concurrency.envelope, "bands": spec.concurrency.bands}
    def one(name: str, metric: str) -> dict[str, object]:
        return {"name": name, "selector": {"models": [model]},
                "sli": {"latency": {"metric": metric, "threshold_seconds": 1.0}},
                "objectives": [{"target": 0.5}], "timeWindow": [{"duration": "1h"}],
                "concurrency": bands}
    return parse_slo_file({"capacity": {"window": "5m", "min_events": 20},
                           "slos": [one("fit-ttft", "ttft"), one("fit-itl", "itl")]})


def _final(slos: SLOFile, registry: Registry | None, paths: Sequence[Path],
           interval: float | None = None) -> tuple[dict[str, object], dict[str, float]]:
    """The ``/slo`` document after the last capture and sums of the last capture's
    ``modelserver_*`` samples by metric name (per model where the sample has one)."""
    from fleetwatch.commands.slo_replay import ReplayInputError, document, normalizer_for, replay

    last = None
    try:
        for _path, _ts, engine in replay(slos, registry, paths, interval):
            last = engine
    except ReplayInputError as exc:
        fail(exc.message)
    assert last is not None
    sums: dict[str, float] = {}
    text = paths[-1].read_text(encoding="utf-8") if paths else ""
    for prefix, value in normalizer_for()(text, str(paths[-1])).samples():
        name = prefix.split("{", 1)[0]
        key = name + ("{input}" if 'token_type="input"' in prefix else "")
        sums[key] = sums.get(key, 0.0) + value
    slo_doc = document(last)["slo"]
    assert isinstance(slo_doc, dict)
    return slo_doc, sums


def fit(slos: SLOFile, registry: Registry | None, paths: Sequence[Path], model: str | None,
        cold_start: float, interval: float | None = None,
        ) -> tuple[ReplicaModel, SLOSpec, float, str]:
    """The replica model, the user's TTFT SLO, the learned capacity and the model name
    (``interval``: seconds between captures without a time in their names)."""
    from fleetwatch.autoscale.replica import FitError, ReplicaModel

    doc, sums = _final(slos, registry, paths, interval)
    rows = [r for r in doc.get("slos", []) if isinstance(r, dict)]  # type: ignore[attr-defined]
    names = sorted({str(r.get("model")) for r in rows})
    if not names:
        fail("--captures: no SLO of --slos selects a model of the captures (a 'teams' "
             "or 'latency_tiers' selector needs --registry)")
    if model is not None and model not in names:
        fail(f"--model {model}: no SLO judged a model of that name in the captures (the "
             f"SLOs judged {', '.join(names)})")
    if model is None:
        if len(names) != 1:
            fail(f"--captures: give --model (the SLOs judged {', '.join(names)})")
        model = names[0]
    spec = ttft_slo(slos, rows, model)
    capacity = next(float(r["capacity"]) for r in rows
                    if r.get("model") == model and r.get("slo") == spec.name)
    fit_doc, _ = _final(fit_slos(spec, model), None, paths, interval)
    requests = sums.get("modelserver_requests_total", 0.0)
    kv = sums.get("modelserver_kv_cache_capacity_tokens", 0.0)
    if not requests or not kv:
        fail(f"{paths[-1]}: no requests or no KV-cache size "
             "(modelserver_kv_cache_capacity_tokens) in the last capture")
    try:
        replica = ReplicaModel.from_slo_document(
            fit_doc, "fit-ttft", "fit-itl", model,
            ref_input_tokens=max(1.0, sums.get("modelserver_tokens_total{input}", 0.0) / requests),
            kv_capacity_tokens=kv, cold_start_seconds=cold_start)
    except FitError as exc:
        fail(f"--captures: {exc}")
    return replica, spec, capacity, model


def result_json(result: ReplayResult) -> str:
    """The result as strict JSON (NaN → null; timeline points as objects)."""
    from fleetwatch.autoscale.fleet import TimelinePoint

    def clean(o: object) -> object:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, TimelinePoint):
            return clean(o._asdict())
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o
    return json.dumps(clean(dataclasses.asdict(result)), allow_nan=False, indent=1)


def _seconds(v: float) -> str:
    """Seconds for the table: whole seconds from 100 s up, else 3 significant digits (a
    short trace's replica-seconds are not 0)."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


#: The table's columns: (header, cell of a :class:`PolicyResult`); laid out to fit 80
#: columns (``--json`` has every field, the timeline included).
_COLUMNS: tuple[tuple[str, Callable[[PolicyResult], str]], ...] = (
    ("policy", lambda r: r.policy),
    ("TTFT\nmet", lambda r: f"{r.ttft_attainment:.1%}"),
    ("good-\nput", lambda r: f"{r.goodput:.1%}"),
    ("replica\nseconds", lambda r: _seconds(r.replica_seconds)),
    ("vs\nstatic", lambda r: f"{r.cost_ratio:.2f}"),
    ("scale\nevents", lambda r: str(r.scale_events)),
    ("rever-\nsals", lambda r: str(r.reversals)),
    ("recov-\nery (s)",
     lambda r: "never" if r.recovery_seconds is None else f"{r.recovery_seconds:.0f}"),
    ("drop-\nped", lambda r: str(r.dropped)),
    ("peak", lambda r: str(r.peak_replicas)),
)


def print_table(result: ReplayResult, console: Console | None = None) -> None:
    """The result as a table on stdout (or ``console``): a legend line, then one row per
    policy."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    m = result.mapping
    console.print(f"{result.requests} requests over {_seconds(result.span_seconds)} s "
                  f"(time compression {m.time_compression:g}); static pool "
                  f"{result.static_replicas} replicas")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=0)
    for header, _cell in _COLUMNS:
        table.add_column(header, justify="left" if header == "policy" else "right",
                         no_wrap=True)
    for r in result.results:
        table.add_row(*(Text(cell(r)) for _header, cell in _COLUMNS))
    console.print(table)


@click.group()
def autoscale() -> None:
    """Autoscaling policies compared on a request trace (docs/autoscaling.md)."""


def _segment(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        fail(f"--segment {text!r}: give START:DURATION in seconds (e.g. 0:900)")
    if a < 0 or not b > 0 or not math.isfinite(a + b):
        fail(f"--segment {text!r}: START must be ≥ 0 and DURATION > 0")
    return a, b


@autoscale.command("replay", epilog=EXAMPLE)
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--slos", "slos_path", required=True, type=click.Path(dir_okay=False),
              help="SLO file: the model's TTFT SLO (threshold, objective, bands).")
@click.option("--registry", "registry_path", type=click.Path(dir_okay=False),
              help="Model registry (for SLOs that select by tier or team).")
@click.option("--captures", multiple=True, required=True,
              help="Captures of one real replica under a concurrency sweep (files or a "
                   "directory of *.prom); repeatable.")
@click.option("--model", default=None, help="Model of the captures (default: the only one).")
@click.option("--interval", type=click.FloatRange(0, min_open=True), default=None,
              help="Seconds between captures whose file names carry no <unix_ms> time.")
@click.option("--segment", "segment_text", default=None, metavar="START:DURATION",
              help="Trace seconds to replay (default: all).")
@click.option("--policy", "policy_names", multiple=True,
              type=click.Choice([p.name for p in POLICIES]),
              help="Policies to replay (repeatable; default: all).")
@click.option("--time-compression", type=click.FloatRange(1, 1e6), default=10.0,
              show_default=True, help="Trace seconds per replay second.")
@click.option("--token-scale", type=click.FloatRange(0, 1e6, min_open=True), default=0.025,
              show_default=True, help="Prompt tokens here per trace token.")
@click.option("--output-token-scale", type=click.FloatRange(0, 1e6, min_open=True),
              default=1.0, show_default=True, help="Output tokens here per trace token.")
@click.option("--max-input-tokens", type=click.IntRange(1), default=512, show_default=True,
              help="Prompt tokens here at most (after --token-scale).")
@click.option("--max-output-tokens", type=click.IntRange(1), default=256, show_default=True,
              help="Output tokens here at most (after --output-token-scale).")
@click.option("--itl-seconds", type=click.FloatRange(0, min_open=True), default=None,
              help="ITL threshold of the joint goodput (default: TTFT only).")
@click.option("--cold-start", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds from scale-out to ready, production clock.")
@click.option("--max-replicas", type=click.IntRange(1, 10_000), default=64, show_default=True,
              help="The autoscaled policies' upper bound (the HPA's maxReplicas).")
@click.option("--static-replicas", type=click.IntRange(1), default=None,
              help="The static pool's size (default: sized for the peak).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def replay_command(trace: str, slos_path: str, registry_path: str | None,
                   captures: tuple[str, ...], model: str | None, interval: float | None,
                   segment_text: str | None,
                   policy_names: tuple[str, ...], time_compression: float, token_scale: float,
                   output_token_scale: float, max_input_tokens: int, max_output_tokens: int,
                   itl_seconds: float | None, cold_start: float, max_replicas: int,
                   static_replicas: int | None, as_json: bool) -> None:
    """Replay TRACE (an Azure LLM trace CSV or a mooncake JSONL) through a simulated
    fleet under each autoscaling policy: TTFT attainment, goodput, replica-seconds and
    their ratio to a static pool sized for the peak, scale events, reversals, time back
    under the SLO after the largest burst, dropped requests (docs/autoscaling.md). Times
    and replica-seconds are on the replay's clock (the trace's divided by
    --time-compression); --cold-start is on the production clock.
    \f
    Many parameters: click passes each of the command's options (every knob of the
    mapping and the fleet is the user's)."""
    from fleetwatch.autoscale.replay import ReplayConfig, replay_policies

    slos = slo_file_or_fail(slos_path)
    registry = registry_or_fail(registry_path, "--registry") if registry_path else None
    requests = read_trace(Path(trace))
    seg = _segment(segment_text)
    if seg is not None:
        requests = segment(requests, *seg)
    if not requests:
        fail(f"{trace}: no request in the trace{' segment' if seg else ''}")
    replica, spec, capacity, _model = fit(slos, registry, capture_paths(captures), model,
                                          cold_start, interval)
    mapping = TraceMapping(time_compression=time_compression, token_scale=token_scale,
                           output_token_scale=output_token_scale,
                           max_input_tokens=max_input_tokens,
                           max_output_tokens=max_output_tokens)
    assert spec.sli.latency is not None
    cfg = ReplayConfig(mapping=mapping, ttft_seconds=spec.sli.latency.threshold_seconds,
                       itl_seconds=itl_seconds, objective=spec.objective, capacity=capacity,
                       max_replicas=max_replicas,
                       static_replicas=static_replicas, targets=slos.autoscaling,
                       duration_seconds=seg[1] if seg is not None else requests[-1].arrival)
    chosen = [policy(n) for n in policy_names] or list(POLICIES)
    result = replay_policies(map_trace(requests, mapping), replica, cfg, chosen,
                             policy("static"))
    if as_json:
        click.echo(result_json(result))
    else:
        print_table(result)



autoscale.add_command(trace_command)
