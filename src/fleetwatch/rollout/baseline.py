"""Baseline files: one model version's per-band SLI summary, stored to compare later
versions or engines with (``fleetwatch baseline record``, ``fleetwatch compare --baseline
FILE``) — the engine-swap procedure ("fix the benchmark baseline first, then compare step
by step").

A versioned YAML document (``format: fleetwatch-baseline/v1``)::

    format: fleetwatch-baseline/v1
    model: slo_sim
    model_version: "1"
    backend: triton            # the engine that served it
    recorded_at: "YYYY-MM-DDThh:mm:ssZ"   # UTC, when it was recorded
    source: "replay of 24 captures"     # or "prometheus http://…"
    slos:
      - slo: sim-latency
        sli: latency
        objective: 0.9
        bands:
          - {band: "1", good: 412, total: 420, latency_seconds: 0.011,
             latency_low_seconds: 0.010, latency_high_seconds: 0.013, concurrency: 1.0}

Counts are SLI events, latency seconds, concurrency requests per replica. Reading is
strict (unknown keys, a negative or non-finite number, a count above 2^53
(:data:`MAX_EVENTS`), more good than total events, another format are errors):
:class:`BaselineError` names the file and the field.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetwatch.rollout.summary import MAX_VALUE, BandSLI, SLOSummary
from fleetwatch.specfile import read_yaml, validate

FORMAT = "fleetwatch-baseline/v1"
#: The largest event count of a band (:data:`~fleetwatch.rollout.summary.MAX_VALUE`).
MAX_EVENTS = MAX_VALUE


class BaselineError(ValueError):
    """An unreadable or invalid baseline file (the message names the file and field)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BandEntry(_Strict):
    """One band of a baseline (see the module doc)."""

    band: str = Field(min_length=1)
    good: float = Field(ge=0, le=MAX_EVENTS, allow_inf_nan=False)
    total: float = Field(ge=0, le=MAX_EVENTS, allow_inf_nan=False)
    latency_seconds: float | None = Field(None, ge=0, allow_inf_nan=False)
    latency_low_seconds: float | None = Field(None, ge=0, allow_inf_nan=False)
    latency_high_seconds: float | None = Field(None, ge=0, allow_inf_nan=False)
    concurrency: float | None = Field(None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _good_within_total(self) -> BandEntry:
        if self.good > self.total:
            raise ValueError(f"good ({self.good:g}) is more than total ({self.total:g})")
        return self


class SLOEntry(_Strict):
    """One SLO of a baseline."""

    slo: str = Field(min_length=1)
    sli: str = ""
    objective: float | None = Field(None, gt=0, lt=1)
    bands: list[BandEntry]


def side_name(model: str, version: str, backend: str | None) -> str:
    """How a comparison names one side: its model version, or the model alone when the
    side has no version (``""``, as vLLM's series), then its backend when one is named:
    ``2``, ``2 (vllm)``, ``tiny-llm (vllm)``."""
    return (version or model) + (f" ({backend})" if backend else "")


class BaselineFile(_Strict):
    """A whole baseline file."""

    format: Literal["fleetwatch-baseline/v1"]
    model: str = Field(min_length=1)
    model_version: str
    backend: str
    recorded_at: str = ""
    source: str = ""
    slos: list[SLOEntry]

    @property
    def name(self) -> str:
        """How a comparison names this side: ``baseline 1 (triton)``."""
        return "baseline " + side_name(self.model, self.model_version,
                                       self.backend or "unknown engine")

    def summaries(self) -> list[SLOSummary]:
        """The summaries the comparison reads."""
        return [SLOSummary(s.slo, self.model, self.model_version, self.backend, s.sli,
                           s.objective,
                           {b.band: BandSLI(b.band, b.good, b.total, b.latency_seconds,
                                            b.latency_low_seconds, b.latency_high_seconds,
                                            b.concurrency) for b in s.bands})
                for s in self.slos]


def build(summaries: list[SLOSummary], recorded_at: str, source: str) -> BaselineFile:
    """A baseline of one model version from its summaries (at least one, all of the same
    model, version and backend; raises ``ValueError`` otherwise)."""
    keys = {(s.model, s.model_version, s.backend) for s in summaries}
    if len(keys) != 1:
        raise ValueError(f"a baseline holds one model version, not {len(keys)}")
    model, version, backend = keys.pop()
    slos = [SLOEntry(slo=s.slo, sli=s.sli, objective=s.objective,
                     bands=[BandEntry(band=b.band, good=b.good, total=b.total,
                                      latency_seconds=b.latency_seconds,
                                      latency_low_seconds=b.latency_low_seconds,
                                      latency_high_seconds=b.latency_high_seconds,
                                      concurrency=b.concurrency)
                            for b in (s.bands[k] for k in s.band_labels())])
            for s in summaries]
    return BaselineFile(format=FORMAT, model=model, model_version=version, backend=backend,
                        recorded_at=recorded_at, source=source, slos=slos)


def dump(baseline: BaselineFile) -> str:
    """The YAML text of a baseline (keys in the module doc's order, None values left
    out)."""
    from fleetwatch.files import BlockDumper

    data = baseline.model_dump(exclude_none=True)
    head = "# fleetwatch baseline: written by `fleetwatch baseline record`\n"
    return head + yaml.dump(data, Dumper=BlockDumper, sort_keys=False, allow_unicode=True)


def record(summaries: list[SLOSummary], source: str, out: str | Path,
           now: datetime.datetime | None = None) -> BaselineFile:
    """Write the baseline of ``summaries`` (one model version, as :func:`build` takes
    them), recorded ``now`` (default: the current UTC time), to the file ``out``; returns
    it. Raises ``OSError`` when the file cannot be written."""
    when = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    baseline = build(summaries, when, source)
    Path(out).write_text(dump(baseline), encoding="utf-8")
    return baseline


def load(path: str | Path) -> BaselineFile:
    """Read and validate a baseline file; raises :class:`BaselineError`."""
    data = read_yaml(path, BaselineError, "baseline")
    if isinstance(data, dict) and data.get("format") != FORMAT:
        raise BaselineError(f"{path}: format: {data.get('format')!r} is not {FORMAT!r} "
                            "(a file written by `fleetwatch baseline record`)")
    return validate(BaselineFile, data, str(path), BaselineError,
                    f"a mapping with format: {FORMAT}")


__all__ = ["FORMAT", "MAX_EVENTS", "BandEntry", "BaselineError", "BaselineFile", "SLOEntry",
           "build", "dump", "load", "record"]
