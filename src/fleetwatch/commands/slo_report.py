"""``fleetwatch slo report``: query a Prometheus that scrapes the sidecars and print, per
SLO, model and sidecar instance: state, error budget remaining, capacity at SLO, observed
concurrency and burn rates by window (overall and per concurrency band) — as a rich table
or JSON.

Whatever Prometheus answers, the outcome is a report or one clean error line: a
Prometheus that cannot answer raises :class:`ReportError` (the CLI exits 1, see
:mod:`.prometheus`); a URL that is not ``http(s)://host[:port]`` or a timeout that is not
positive raise :class:`ReportInputError` (exit 2). The report itself is built by
:func:`fleetwatch.slo.report.build_report` (odd samples tolerated, label values printed
as text: rich markup and terminal control characters are shown, never interpreted).
"""

from __future__ import annotations

import math
import urllib.parse
from typing import IO, Any

import click

from fleetwatch.commands.prometheus import PrometheusError, query
from fleetwatch.slo.report import QUERIES, ReportRow, build_report, detail, table

#: Prometheus could not be queried (message says which URL and why): exit 1.
ReportError = PrometheusError


class ReportInputError(click.ClickException):
    """A ``--prometheus`` URL or ``--timeout`` that cannot work: bad input, exit 2, one
    ``fleetwatch: error:`` line (click reports it for the CLI)."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"fleetwatch: error: {self.format_message()}", err=True)


def check_target(base: str, timeout: float) -> None:
    """Raise :class:`ReportInputError` unless ``base`` is an ``http(s)://host[:port]`` URL
    and ``timeout`` a positive number of seconds."""
    where = f"--prometheus {detail(repr(base))}"
    try:
        parts = urllib.parse.urlsplit(base)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ReportInputError(f"{where}: not a URL ({detail(str(exc))})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReportInputError(f"{where}: not an http(s) URL with a host "
                               "(e.g. http://127.0.0.1:9090)")
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise ReportInputError(f"--timeout {timeout!r}: must be a positive number of seconds")


def fetch_report(base: str, timeout: float = 10.0) -> list[ReportRow]:
    """One row per (SLO, model, version, backend, instance), sorted; ``timeout`` seconds
    per query. Raises :class:`ReportInputError` or :class:`ReportError`."""
    check_target(base, timeout)
    return build_report({q: query(base, q, timeout) for q in QUERIES})


def render_table(report: list[ReportRow]) -> None:
    """Print the report with rich (see :func:`fleetwatch.slo.report.table`); cells are
    plain text, never rich markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    columns, rows = table(report)
    t = Table(title="fleetwatch SLOs")
    for col in columns:
        t.add_column(Text(col))
    for row in rows:
        t.add_row(*(Text(c) for c in row))
    Console().print(t)
