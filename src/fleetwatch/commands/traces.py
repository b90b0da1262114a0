"""``fleetwatch traces FILE…``: per-request facts of captured OTLP trace export bodies.

Each file is one body as POSTed to ``/v1/traces`` (OTLP JSON or protobuf, gzip or not:
detected from its bytes). The files are read in order through the same join the sidecar
uses (:mod:`fleetwatch.traces.join`, then everything pending is flushed) and the load each
request saw is estimated over all of them (:mod:`fleetwatch.traces.concurrency`).
Output: a table, or ``--json`` one object per request per line
(:meth:`~fleetwatch.traces.facts.RequestFacts.to_json`), or ``--metrics`` the normalized
histograms the requests give (:data:`fleetwatch.traces.histograms.BOUNDS`, every source).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from fleetwatch.otlp.decode import OTLPDecodeError, decode_spans
from fleetwatch.traces.concurrency import LoadEstimator
from fleetwatch.traces.facts import RequestFacts
from fleetwatch.traces.histograms import FAMILIES, TraceHistograms
from fleetwatch.traces.join import TraceJoiner

_COLUMNS = ("model", "model_version", "source", "start_unix_s", "e2e_seconds",
            "queue_seconds", "compute_seconds", "first_response_seconds", "ttft_seconds",
            "tpot_seconds", "prompt_tokens", "completion_tokens", "concurrency")


class TracesInputError(click.ClickException):
    """A file that cannot be read or decoded (exit 2, naming the file): one line
    ``fleetwatch: error: FILE: …`` on stderr, as every other command's bad input."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"fleetwatch: error: {self.format_message()}", err=True)


def read_facts(files: Sequence[str], vllm_model: str = "vllm",
               vllm_model_version: str = "") -> tuple[list[RequestFacts], TraceJoiner]:
    """Every request of the files, in join order, their concurrency estimated."""
    joiner = TraceJoiner(vllm_model, vllm_model_version, timeout_s=float("inf"))
    facts: list[RequestFacts] = []
    for i, name in enumerate(files):
        try:
            body = Path(name).read_bytes()
        except OSError as exc:
            raise TracesInputError(f"{name}: cannot read: {exc.strerror or exc}") from None
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


def print_table(facts: Sequence[RequestFacts], console: Console) -> None:
    """The facts as a rich table (one row per request; ``-`` where a value is absent)."""
    table = Table(title=f"{len(facts)} requests from traces")
    for c in _COLUMNS:
        table.add_column(c, overflow="fold")
    for f in facts:
        table.add_row(*(_cell(getattr(f, c)) for c in _COLUMNS))
    console.print(table)


def metrics_text(facts: Sequence[RequestFacts]) -> str:
    """The normalized histograms of the requests (text format 0.0.4)."""
    hists = TraceHistograms(FAMILIES, sources=("triton", "vllm"))
    hists.add(facts)
    return "".join(f.text() for f in hists.families_text())
