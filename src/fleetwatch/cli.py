"""The ``fleetwatch`` command line: thin — parse arguments, call the library, map errors to
exit codes (0 ok, 1 runtime failure, 2 bad input or configuration, with a message naming
the file and the field)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import click

from fleetwatch import __version__
from fleetwatch.commands.autoscale import autoscale
from fleetwatch.commands.common import fail as _fail
from fleetwatch.commands.common import registry_or_fail as _registry
from fleetwatch.commands.common import setup_logging as _setup_logging
from fleetwatch.commands.common import slo_file_or_fail as _slo_file
from fleetwatch.commands.generate import GENERATORS
from fleetwatch.commands.lint import lint_command
from fleetwatch.commands.quota import check_quota_file, quota
from fleetwatch.commands.registry import registry
from fleetwatch.commands.rollout import ROLLOUT_COMMANDS
from fleetwatch.exporters.sources import KINDS
from fleetwatch.sidecar.config import ConfigError, load_config
from fleetwatch.wording import counted


@click.group()
@click.version_option(__version__, prog_name="fleetwatch")
def main() -> None:
    """fleetwatch: one metric schema, SLOs and autoscaling signals for Triton, vLLM,
    SGLang and dcgm-exporter."""


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="Sidecar configuration YAML.")
@click.option("--slos", "slos_path", type=click.Path(dir_okay=False),
              help="SLO file: run the SLO engine (/slo, /autoscaling, fleetwatch_slo_*).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def serve(config_path: str, slos_path: str | None, log_level: str) -> None:
    """Run the sidecar: scrape the targets, serve /metrics, /healthz, /readyz."""
    from fleetwatch.otlp.auth import OTLPAuthError
    from fleetwatch.otlp.start import OTLPExtraMissing
    from fleetwatch.sidecar.server import ListenError, run_sidecar

    _setup_logging(log_level)
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        _fail(str(exc))
    registry = _registry(cfg.registry, f"{config_path}: registry")
    check_quota_file(cfg, config_path)
    slos = _slo_file(slos_path) if slos_path else None
    if slos is not None:
        try:  # the pool's own SLOs (selector.roles); the file itself for role both
            slos = slos.for_role(cfg.role)
        except ValueError as exc:
            _fail(f"{slos_path}: field 'selector.roles': {exc}, the role of the targets of "
                  f"{config_path}")
    try:
        asyncio.run(run_sidecar(cfg, registry, slos=slos))
    except ListenError as exc:
        _fail(f"{exc} (listen: in {config_path})", code=1)
    except OTLPExtraMissing as exc:
        _fail(f"{config_path}: field 'metrics_export': {exc}", code=1)
    except OTLPAuthError as exc:
        _fail(f"{config_path}: {exc}", code=1)


@main.group()
def slo() -> None:
    """SLO files and reports."""


@slo.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
def slo_validate(file: str) -> None:
    """Validate an SLO file (exit 2 with the file, SLO and field on error).

    A latency threshold that is not one of the OpenTelemetry GenAI conventions'
    recommended bucket boundaries of its metric gets a note on stderr (exit still 0): the
    engine counts good events only at a boundary the source exports, and a source with
    the recommended buckets makes that SLO ``misconfigured``.
    """
    from fleetwatch.labels.schema import METRICS_BY_NAME
    from fleetwatch.otlp.semconv import RECOMMENDED_BUCKETS
    from fleetwatch.slo.sli import LATENCY_METRICS, matching_bound, nearest_bounds

    f = _slo_file(file)
    for s in f.slos:
        lat = s.sli.latency
        if lat is not None:
            family = LATENCY_METRICS[lat.metric]
            bounds = RECOMMENDED_BUCKETS.get(METRICS_BY_NAME[family].otel, ())
            thr = lat.threshold_seconds
            if bounds and matching_bound(bounds, thr) is None:
                near = nearest_bounds(bounds, thr, 1)
                click.echo(f"{file}: {s.name}: note: threshold {thr:g} s is not a recommended "
                           f"bucket boundary of {family} (nearest: "
                           + ", ".join(f"{b:g}" for b in near) + "); it counts good events "
                           "only where the source exports that boundary, else the SLO reads "
                           "misconfigured", err=True)
        factors = ", ".join(f"{w.name} {w.factor(s.period_seconds):.3g}x" for w in f.windows)
        bands = ", ".join(format(b, "g") for b in s.concurrency.bands)
        click.echo(f"{s.name}: {s.sli.kind}, objective {s.objective:g}, envelope "
                   f"{s.concurrency.envelope:g}, bands [{bands}]; burn thresholds {factors}")
    click.echo(f"{file}: ok ({counted(len(f.slos), 'SLO')})")


@slo.command("report")
@click.option("--prometheus", "prom_url", required=True,
              help="Prometheus base URL, e.g. http://127.0.0.1:9090")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@click.option("--html", "html_out", type=click.Path(),
              help="Also write the status page of the fleet to this file (self-contained).")
def slo_report(prom_url: str, as_json: bool, timeout: float, html_out: str | None) -> None:
    """Per SLO and model: budget remaining, burn rates by window and band, capacity and
    state, read from a Prometheus that scrapes the sidecars."""
    from fleetwatch.commands.slo_report import ReportError, fetch_report, render_table

    try:
        report = fetch_report(prom_url, timeout=timeout)
        if html_out:
            from fleetwatch.commands.slo_html import write_page

            click.echo(f"wrote {write_page(html_out, prom_url, report, timeout)}", err=True)
    except ReportError as exc:
        _fail(str(exc), code=1)
    except OSError as exc:
        _fail(f"--html {html_out}: cannot write: {exc.strerror or exc}", code=1)
    if as_json:
        import json

        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        render_table(report)


@slo.command("replay")
@click.option("--slos", "slos_path", required=True, type=click.Path(dir_okay=False),
              help="SLO file.")
@click.option("--registry", "registry_path", type=click.Path(dir_okay=False),
              help="Model registry (for team / latency-tier selectors).")
@click.option("--interval", type=float, default=None,
              help="Seconds between captures (default: the <unix_ms> in each file name).")
@click.option("--each", is_flag=True, help="Print /slo and /autoscaling after every capture "
              "(one JSON line each).")
@click.option("--html", "html_out", type=click.Path(), default=None,
              help="Also write the status page of the replay to this file (one "
                   "self-contained HTML file).")
@click.argument("captures", nargs=-1, required=True, type=click.Path(dir_okay=False))
def slo_replay(slos_path: str, registry_path: str | None, interval: float | None, each: bool,
               html_out: str | None, captures: tuple[str, ...]) -> None:
    """Replay captured /metrics bodies through the normalizer and the SLO engine and print
    the final /slo and /autoscaling JSON (exit 2 naming the file on bad input)."""
    from pathlib import Path as _Path

    from fleetwatch.commands.slo_replay import run

    try:
        run(_slo_file(slos_path), _registry(registry_path), [_Path(c) for c in captures],
            interval, each, click.echo, _Path(html_out) if html_out else None)
    except OSError as exc:
        _fail(f"{exc.filename or html_out}: cannot write: {exc.strerror or exc}", code=1)


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="Sidecar configuration YAML.")
def validate(config_path: str) -> None:
    """Validate a sidecar configuration, the registry and quota file it names, and its
    declared placement against the placement policy (an interactive model sharing a GPU
    is reported, exit 1)."""
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        _fail(str(exc))
    registry = _registry(cfg.registry, f"{config_path}: registry")
    from fleetwatch.commands.quota import check_config_gpus

    check_config_gpus(cfg, registry, config_path)
    n = len(cfg.targets)
    click.echo(f"{config_path}: ok ({n} {'target' if n == 1 else 'targets'}, "
               f"{len(registry.entries)} registry "
               f"{'entry' if len(registry.entries) == 1 else 'entries'})")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--source", type=click.Choice(KINDS),
              default="auto", show_default=True, help="Which server produced the exposition.")
@click.option("--registry", "registry_path", type=click.Path(dir_okay=False),
              help="Model registry YAML (adds modelserver_model_info).")
@click.option("--passthrough", is_flag=True, help="Re-emit upstream families no mapping knows.")
@click.option("--runtime", default=None, help="runtime label for models (default: unknown).")
def normalize(file: str, source: str, registry_path: str | None, passthrough: bool,
              runtime: str | None) -> None:
    """Print the normalized exposition of a captured /metrics body (FILE, or - for stdin).

    A summary (source, series, unmapped families, skipped lines) goes to stderr.
    """
    from fleetwatch.commands.captures import read_capture
    from fleetwatch.exporters.capture import MAX_CAPTURE_BYTES, CaptureError, capture_text
    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.parser import describe_if_not_metrics
    from fleetwatch.exporters.render import render
    from fleetwatch.exporters.sources import TABLES, detect_kind
    from fleetwatch.exporters.table import TargetContext

    try:
        text = (capture_text(sys.stdin.buffer.read(MAX_CAPTURE_BYTES + 1)) if file == "-"
                else read_capture(Path(file)))
    except OSError as exc:
        _fail(f"{file}: cannot read: {exc.strerror or exc}")
    except CaptureError as exc:
        _fail(f"{file}: {exc}: not a Prometheus exposition")
    if not text.strip():
        _fail(f"{file}: empty: not a Prometheus exposition")
    if text.lstrip()[:1] == "<":
        _fail(f"{file}: looks like HTML, not a Prometheus exposition")
    registry = _registry(registry_path)
    kind = detect_kind(text) if source == "auto" else source
    ctx = TargetContext(runtime_for=lambda _m: runtime or "unknown")
    result = Normalizer(TABLES[kind], ctx, passthrough).normalize(text)
    if result.refused is not None:
        _fail(f"{file}: refused ({result.refused[0]}): {result.refused[1]}")
    if result.series_count == 0:
        problem = describe_if_not_metrics(text)
        if problem:  # not an exposition at all: the one error line, no summary
            _fail(f"{file}: {problem}")
    extra = {"modelserver_model_info": registry.info_lines(result.models)}
    sys.stdout.write(render([result], extra))
    meta = result.meta
    click.echo(f"{file}: source={kind} samples={meta.sample_lines} "
               f"series={result.series_count} unmapped_families={len(result.unmapped)} "
               f"skipped_lines={len(meta.invalid)} "
               f"refused_samples={result.invalid_samples.total()}", err=True)
    for bad in meta.invalid[:5]:
        click.echo(f"{file}:{bad.lineno}: skipped: {bad.reason}", err=True)
    for reason, n in sorted(result.invalid_samples.items()):
        click.echo(f"{file}: refused {n} sample(s): {reason}, e.g. "
                   f"{result.invalid_examples.get(reason, '?')[:160]}", err=True)
    if kind == "unknown":
        message = (f"{file}: no mapping for this server's metrics; nothing normalized "
                   "(--passthrough re-emits them)")
        if not result.passthrough:  # nothing came out: bad input, not a result
            _fail(message)
        click.echo(message, err=True)
    if result.series_count == 0 and source != "auto" and not result.passthrough:
        # no series: bad input, unless the source's own samples were all refused (then
        # the refusals above are the answer)
        detected = detect_kind(text)
        other = detected not in (source, "unknown")
        if other or not result.invalid_samples:
            hint = f" (it looks like {detected}: --source {detected})" if other else ""
            _fail(f"{file}: no {source} series in this exposition{hint}")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per request per line.")
@click.option("--metrics", is_flag=True, help="Print the normalized histograms instead.")
@click.option("--wide", is_flag=True, help="Every fact in the table (start time, compute "
              "and first-response times; seconds), as wide as the values need.")
@click.option("--vllm-model", default="vllm", show_default=True,
              help="Model name of vLLM's llm_request spans (they do not carry one).")
def traces(files: tuple[str, ...], as_json: bool, metrics: bool, wide: bool,
           vllm_model: str) -> None:
    """Print per-request facts of captured OTLP trace export bodies (JSON or protobuf)."""
    from rich.console import Console

    from fleetwatch.commands.traces import metrics_text, print_table, read_facts

    facts, joiner = read_facts(files, vllm_model)
    if metrics:
        sys.stdout.write(metrics_text(facts))
    elif as_json:
        for f in facts:
            click.echo(f.to_json())
    else:
        print_table(facts, Console(), wide)
    st = joiner.stats
    click.echo(f"{counted(len(files), 'file')}: {counted(st.spans, 'span')}, "
               f"{counted(len(facts), 'request')} ({st.partial} partial), "
               f"{st.ignored} other spans ignored", err=True)


@main.command()
@click.option("--markdown", is_flag=True, help="Print docs/metrics.md instead of a table.")
def schema(markdown: bool) -> None:
    """Print the normalized metric schema and which upstream metrics feed it."""
    if markdown:
        from fleetwatch.schema_doc import metrics_markdown

        sys.stdout.write(metrics_markdown())
        return
    from rich.console import Console
    from rich.table import Table

    from fleetwatch.labels.schema import METRICS, SELF_METRICS, series_labels
    from fleetwatch.schema_doc import feeds

    f = feeds()
    table = Table(title="fleetwatch normalized schema", show_lines=False)
    for col in ("metric", "type", "unit", "labels", "sources"):
        table.add_column(col)
    for m in METRICS + SELF_METRICS:
        sources = sorted({s for s, _ in f.get(m.name, [])}) or ["fleetwatch"]
        extra = [lab for lab in series_labels(m) if lab not in
                 ("model", "model_version", "model_namespace", "backend", "runtime",
                  "dp_rank")]
        table.add_row(m.name, m.type, m.unit, ", ".join(extra), ", ".join(sources))
    # not a terminal (a pipe, a file): as wide as the rows, names never cut
    Console(width=None if sys.stdout.isatty() else 1000).print(table)


@main.command()
@click.option("--duration", type=click.FloatRange(0, 86400, min_open=True), default=600.0,
              show_default=True,
              help="Stop after this many seconds, at most a day (the load is bounded too).")
@click.option("--port", type=click.IntRange(0, 65535), default=9810, show_default=True,
              help="Sidecar port (0 = any free port).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def demo(duration: float, port: int, log_level: str) -> None:
    """Run the sidecar on an embedded default: a real local Triton with demo models and a
    real vLLM engine (CPU, tiny model), both under bounded load, side by side."""
    from fleetwatch.demo.process import ServerStartError
    from fleetwatch.demo.run import run_demo  # a taken port: one line, before any server

    _setup_logging(log_level)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            run_demo(duration=duration, port=port)
        except ServerStartError as exc:  # a server that did not start: its message, exit 1
            _fail(str(exc), code=1)


for _command in (*GENERATORS, *ROLLOUT_COMMANDS):
    main.add_command(_command)
main.add_command(quota)
main.add_command(registry)
main.add_command(autoscale)
main.add_command(lint_command)


if __name__ == "__main__":  # pragma: no cover
    main()
