"""``fleetwatch traces FILE…``: per-request facts of captured OTLP trace export bodies.

Each file is one body as POSTed to ``/v1/traces`` (OTLP JSON or protobuf, gzip or not:
detected from its bytes). The files are read in order through the same join the sidecar
uses (:mod:`fleetwatch.traces.join`, then everything pending is flushed) and the load each
request saw is estimated over all of them (:mod:`fleetwatch.traces.concurrency`).
Output: a table that fits 80 columns (``--wide``: every fact, as wide as needed), or
``--json`` one object per request per line
(:meth:`~fleetwatch.traces.facts.RequestFacts.to_json`), or ``--metrics`` the normalized
histograms the requests give (:data:`fleetwatch.traces.histograms.BOUNDS`, every source).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetwatch.otlp.decode import OTLPDecodeError, decode_spans
from fleetwatch.traces.concurrency import LoadEstimator
from fleetwatch.traces.facts import RequestFacts
from fleetwatch.traces.histograms import FAMILIES, TraceHistograms
from fleetwatch.traces.join import TraceJoiner

#: Every fact of a request, as ``--wide`` prints them (seconds, Unix seconds, counts).
WIDE_COLUMNS = ("model", "model_version", "source", "start_unix_s", "e2e_seconds",
                "queue_seconds", "compute_seconds", "first_response_seconds", "ttft_seconds",
                "tpot_seconds", "prompt_tokens", "completion_tokens", "concurrency")


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the default table: its header and the cell of one request."""

    header: str
    cell: Callable[[RequestFacts], str]
    justify: Literal["left", "right"] = "right"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _tokens(f: RequestFacts) -> str:
    if f.prompt_tokens is None and f.completion_tokens is None:
        return "-"
    return f"{_cell(f.prompt_tokens)}/{_cell(f.completion_tokens)}"


#: The default table: what tells one request from another, times in milliseconds, so that
#: it fits 80 columns (``--wide`` adds the start time, compute and first-response times).
COLUMNS = (
    Column("model", lambda f: f.model, "left"),
    Column("version", lambda f: f.model_version or "-", "left"),
    Column("source", lambda f: f.source, "left"),
    Column("e2e", lambda f: _ms(f.e2e_seconds)),
    Column("queue", lambda f: _ms(f.queue_seconds)),
    Column("ttft", lambda f: _ms(f.ttft_seconds)),
    Column("tpot", lambda f: _ms(f.tpot_seconds)),
    Column("tokens", _tokens),
    Column("load", lambda f: "-" if f.concurrency is None else f"{f.concurrency:.2f}"),
)


class TracesInputError(click.ClickException):
    """A file that cannot be read or decoded (exit 2, naming the file): one line
    ``fleetwatch: error: FILE: …`` on stderr, as every other command's bad input."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"fleetwatch: error: {self.format_message()}", err=True)


def read_facts(files: Sequence[str], vllm_model: str = "vllm",
               vllm_model_version: str = "") -> tuple[list[RequestFacts], TraceJoiner]:
    """Every request of the files, in join order, their concurrency estimated."""
    joiner = TraceJoiner(vllm_model, vllm_model_version, timeout_s=float("inf"),
                         caller_wait_s=float("inf"))
    facts: list[RequestFacts] = []
    for i, name in enumerate(files):
        try:
            body = Path(name).read_bytes()
        except OSError as exc:
            raise TracesInputError(f"{name}: cannot read: {exc.strerror or exc}") from None
        if not body.strip():  # valid protobuf (no spans), but a file given by hand: a mistake
            raise TracesInputError(f"{name}: empty: not an OTLP trace export")
        try:
            facts += joiner.add(decode_spans(body), float(i))
        except OTLPDecodeError as exc:
            raise TracesInputError(f"{name}: not an OTLP trace export: {exc}") from None
    facts += joiner.flush()
    est = LoadEstimator()
    est.add(facts, 0.0)
    return est.flush(), joiner


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6f}" if v < 1e6 else f"{v:.3f}"
    return str(v)


def print_table(facts: Sequence[RequestFacts], console: Console, wide: bool = False) -> None:
    """The facts as a table, one row per request, ``-`` where a value is absent: by default
    :data:`COLUMNS` (milliseconds; ``load`` is the estimated concurrency), laid out to fit
    80 columns; with ``wide`` every fact of :data:`WIDE_COLUMNS` in its own unit, as wide
    as the values need (for a pager or a file)."""
    title = f"{len(facts)} requests from traces"
    if wide:
        table = Table(title=title)
        for name in WIDE_COLUMNS:
            table.add_column(name, no_wrap=True)
        for f in facts:
            table.add_row(*(Text(_cell(getattr(f, name))) for name in WIDE_COLUMNS))
        natural = console.measure(table, options=console.options.update_width(10_000))
        console.width = max(console.width, natural.maximum)
    else:
        # the legend on its own line: a table title wraps at the table's width
        console.print(f"{title} (times in ms, tokens in/out, load = mean concurrency)")
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for c in COLUMNS:
            table.add_column(c.header, justify=c.justify, overflow="fold")
        for f in facts:
            table.add_row(*(Text(c.cell(f)) for c in COLUMNS))  # names are not markup
    console.print(table)


def metrics_text(facts: Sequence[RequestFacts]) -> str:
    """The normalized histograms of the requests (text format 0.0.4)."""
    hists = TraceHistograms(FAMILIES, sources=("triton", "vllm"))
    hists.add(facts)
    return "".join(f.text() for f in hists.families_text())
