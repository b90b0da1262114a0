"""``fleetwatch slo report``: query a Prometheus that scrapes the sidecars and print, per
SLO, model and sidecar instance: state, error budget remaining, capacity at SLO, observed
concurrency and burn rates by window (overall and per concurrency band) — as a rich table
or JSON.

Whatever Prometheus answers, the outcome is a report or one clean error line: a
Prometheus that cannot answer raises :class:`ReportError` (the CLI exits 1, see
:mod:`.prometheus`); a URL that is not ``http(s)://host[:port]`` or a timeout that is not
positive raise :class:`ReportInputError` (exit 2). The report itself is built by
:func:`fleetwatch.slo.outputs.report.build_report` (odd samples tolerated, label values printed
as text: rich markup and terminal control characters are shown, never interpreted).
"""

from __future__ import annotations

import math
import urllib.parse
from typing import IO, TYPE_CHECKING, Any

import click

from fleetwatch.commands.prometheus import PrometheusError, query
from fleetwatch.slo.outputs.report import QUERIES, ReportRow, build_report, detail, table

if TYPE_CHECKING:
    from rich.console import Console

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


#: Columns left out first when the terminal is too narrow (after the burn windows
#: between the shortest and the longest); ``--json`` keeps everything.
OPTIONAL_COLUMNS = ("version", "concurrency", "instance")


def _drop_order(columns: list[str]) -> list[int]:
    """Indexes of the columns a narrow terminal loses, first to last: the burn windows
    between the shortest and the longest, :data:`OPTIONAL_COLUMNS`, then the shortest
    window (the longest window's burn stays)."""
    burns = [i for i, c in enumerate(columns) if c.startswith("burn ")]
    return (burns[1:-1] + [columns.index(c) for c in OPTIONAL_COLUMNS if c in columns]
            + burns[:1][: len(burns) - 1])


#: Cells longer than this fold onto more lines rather than widen their column; on a
#: terminal still too narrow, the widest columns fold down to MIN_FOLD.
FOLD_AT = 16
MIN_FOLD = 8


def _min_width(header: str, cells: list[str]) -> int:
    """The narrowest a column may get: its longest header word, and its longest cell up
    to :data:`FOLD_AT` characters (numbers and states whole, names folded)."""
    return max(max(len(w) for w in header.split() or [""]),
               min(max((len(c) for c in cells), default=0), FOLD_AT))


def render_table(report: list[ReportRow], console: Console | None = None) -> None:
    """Print the report with rich (see :func:`fleetwatch.slo.outputs.report.table`) as wide as
    the terminal: long cells fold (never cut to "…"); when the columns do not fit at
    their :func:`_min_width`, the least needed are left out (:func:`_drop_order`; the
    caption names them), then the widest fold further. Cells are plain text, never rich
    markup."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    columns, rows = table(report)
    widths = [_min_width(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    keep, drop = list(range(len(columns))), _drop_order(columns)
    def excess() -> int:  # cells padded by a space each side, one apart, no edges
        return sum(widths[i] for i in keep) + 3 * len(keep) - 1 - console.width

    while drop and excess() > 0:
        keep.remove(drop.pop(0))
    while excess() > 0 and max(widths[i] for i in keep) > MIN_FOLD:  # fold names more
        widest = max(keep, key=lambda i: widths[i])
        widths[widest] -= 1
    natural = sum(max([len(columns[i]), *(len(r[i]) for r in rows)]) for i in keep)
    fixed = natural + 3 * len(keep) - 1 > console.width  # else rich's natural widths
    t = Table(title="fleetwatch SLOs", box=box.SIMPLE_HEAD, show_edge=False)
    for i in keep:
        t.add_column(Text(columns[i]), overflow="fold", width=widths[i] if fixed else None)
    for row in rows:
        t.add_row(*(Text(row[i]) for i in keep))
    left_out = [columns[i] for i in range(len(columns)) if i not in keep]
    if not rows:
        t.caption = Text("no SLO in Prometheus yet: no fleetwatch_slo_* series (is a "
                         "sidecar with an SLO file scraped, for a scrape or two?)")
    elif left_out:
        t.caption = Text(f"not shown at {console.width} columns: {', '.join(left_out)} "
                         "(--json has every column)")
    console.print(t)
