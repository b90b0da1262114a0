"""``fleetwatch baseline record``: store one model version's per-band SLI summary as a
versioned YAML file (:mod:`fleetwatch.rollout.baseline`), from a Prometheus that scrapes
the sidecars or from captures replayed offline — the sources of ``fleetwatch compare``
(:mod:`.compare`), with the same errors (an unknown model or version: exit 2 naming the
versions there; an output that cannot be written: exit 1)."""

from __future__ import annotations

import datetime
from pathlib import Path

from fleetwatch.rollout.baseline import BaselineFile, build, dump
from fleetwatch.rollout.summary import SLOSummary


def record(summaries: list[SLOSummary], source: str, out: str | Path,
           now: datetime.datetime | None = None) -> BaselineFile:
    """Write the baseline of ``summaries`` (one model version) to ``out``; returns it.
    Raises ``OSError`` when the file cannot be written."""
    when = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    baseline = build(summaries, when, source)
    Path(out).write_text(dump(baseline), encoding="utf-8")
    return baseline
