"""``fleetwatch slo report --html OUT``: the status page of the fleet, from the Prometheus
that scrapes the sidecars, as one self-contained HTML file (inline CSS and SVG, no script,
no external asset) to attach to an incident or a rollout review.

The report rows come from :func:`fleetwatch.commands.slo_report.fetch_report`; the page
asks Prometheus :data:`~fleetwatch.page.from_report.PAGE_QUERIES` too and maps both with
:func:`fleetwatch.page.from_report.report_page`. Errors are the report's
(:class:`~fleetwatch.commands.slo_report.ReportError`, exit 1).
"""

from __future__ import annotations

from pathlib import Path

from fleetwatch.commands.prometheus import query
from fleetwatch.page.from_report import PAGE_QUERIES, report_page
from fleetwatch.page.render import render_page
from fleetwatch.slo.outputs.report import ReportRow


def write_page(out: str | Path, base: str, report: list[ReportRow],
               timeout: float = 10.0) -> Path:
    """Query the page's extra series at ``base``, render the page of ``report`` and
    write it to ``out`` (UTF-8); the path written. Raises
    :class:`~fleetwatch.commands.slo_report.ReportError` or ``OSError``."""
    answers = {q: query(base, q, timeout) for q in PAGE_QUERIES}
    page = report_page(report, answers, base)
    page["links"] = [("Prometheus", base)]
    path = Path(out)
    path.write_text(render_page(page), encoding="utf-8")
    return path
