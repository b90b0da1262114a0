"""SLO specifications (YAML), validated strictly; field names follow OpenSLO where it has them.

Why this module is long: it is the SLO file's whole schema, one model per section, each
with its own validation messages; split, the schema of one file would be scattered.

::

    windows:                       # optional; default: the SRE Workbook's catalog below
      - {long: 1h, short: 5m, budget_consumed: 0.02, severity: page}    # 14.4x for 30d
      - {long: 6h, short: 30m, budget_consumed: 0.05, severity: page}   # 6x
      - {long: 1d, short: 2h, budget_consumed: 0.10, severity: ticket}  # 3x
      - {long: 3d, short: 6h, budget_consumed: 0.10, severity: ticket}  # 1x
    capacity: {window: 6h, min_events: 200, hysteresis_updates: 3}
    autoscaling: {queue_wait_seconds: 0.5, kv_cache_usage_ratio: 0.9,
                  gpu_memory_usage_ratio: 0.9, cold_start_bound_seconds: 120,
                  cold_start_min_replicas: 2}
    limits: {max_models_per_slo: 2000, forget_model_after: 1h}   # engine state bounds
    slos:
      - name: llm-ttft
        description: TTFT within 500 ms
        selector: {models: ["llama-*"], teams: [genai], latency_tiers: [interactive]}
        sli:
          latency: {metric: ttft, threshold_seconds: 0.5}   # good = TTFT ≤ 0.5 s
        objectives: [{target: 0.99}]                         # or "99%"
        timeWindow: [{duration: 28d, isRolling: true}]
        budgetingMethod: Occurrences
        concurrency: {envelope: 8, bands: [1, 2, 4, 8, 16, 32]}

SLI kinds: ``latency`` (events from histogram buckets of ``ttft``, ``itl``, ``tpot``,
``request`` or ``queue``; the threshold must be a bucket boundary of the source),
``availability`` (good = successful requests), ``timeslice`` (OpenSLO ``Timeslices``: an
interval is good when its quantile from Triton's summaries, or its mean latency, is ≤ the
threshold). A window's burn-rate threshold is ``budget_consumed × period / long``
(14.4 / 6 / 3 / 1 for a 30-day period).

Numbers are what they say: ``"99.9%"`` is 0.999 and ``"1.1h"`` 3960 s (decimal
arithmetic). Durations are whole milliseconds up to 100 years (Prometheus ranges);
thresholds, envelopes and bands are finite; a band is a label value, so it has at most 6
significant digits (``format(b, "g")``); two window pairs may not share both windows.

Errors raise :class:`SLOSpecError` naming the file, the SLO and the field.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from fleetwatch.slo.durations import format_duration, parse_duration
from fleetwatch.slo.sli import LATENCY_METRICS, SUMMARY_METRICS
from fleetwatch.slo.trace_sli import check_source
from fleetwatch.specfile import format_validation_error, read_yaml

# Re-exported: the SLO file's latency vocabulary is derived from the schema in .sli.
__all__ = ["LATENCY_METRICS", "SUMMARY_METRICS", "format_duration", "parse_duration"]

class SLOSpecError(ValueError):
    """An invalid SLO file; the message names the file, the SLO and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


Duration = float  # seconds; YAML accepts "5m", "1h", "28d" or a number of seconds


class BurnWindow(_Strict):
    """One multiwindow multi-burn-rate pair: alert when both windows burn faster than
    ``budget_consumed × period / long``."""

    long: Duration
    short: Duration
    budget_consumed: float = Field(gt=0, le=1)
    severity: Literal["page", "ticket"] = "page"

    @field_validator("long", "short", mode="before")
    @classmethod
    def _dur(cls, v: object) -> float:
        return parse_duration(v)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _short_shorter(self) -> BurnWindow:
        if self.short >= self.long:
            raise ValueError("short window must be shorter than long window")
        return self

    def factor(self, period_seconds: float) -> float:
        """Burn-rate threshold for an SLO period (14.4 for 1h/2 % over 30 days)."""
        return self.budget_consumed * period_seconds / self.long

    @property
    def name(self) -> str:
        """``"1h/5m"``: the pair's ``burn_tier`` label value."""
        return f"{format_duration(self.long)}/{format_duration(self.short)}"


DEFAULT_WINDOWS = (
    BurnWindow(long="1h", short="5m", budget_consumed=0.02, severity="page"),
    BurnWindow(long="6h", short="30m", budget_consumed=0.05, severity="page"),
    BurnWindow(long="1d", short="2h", budget_consumed=0.10, severity="ticket"),
    BurnWindow(long="3d", short="6h", budget_consumed=0.10, severity="ticket"),
)


class Selector(_Strict):
    """Which registry models an SLO covers: names (globs), teams, latency tiers. Empty
    lists match everything; all given criteria must hold.

    ``roles`` — the pools (prefill/decode disaggregation, the sidecar's ``role``) the SLO
    is judged on; empty: every pool. TTFT belongs to the prefill pool and ITL to the
    decode pool (Dynamo sizes each pool from its own), so a disaggregated model has one
    SLO per role and each pool's sidecar judges, and scales on, its own.
    """

    models: list[str] = Field(default_factory=list)
    teams: list[str] = Field(default_factory=list)
    latency_tiers: list[str] = Field(default_factory=list)
    roles: list[Literal["prefill", "decode", "both"]] = Field(default_factory=list)

    def covers_role(self, role: str) -> bool:
        """Whether a pool of ``role`` judges the SLO."""
        return not self.roles or role in self.roles


class LatencySLI(_Strict):
    """Good event: an observation of ``metric`` ≤ ``threshold_seconds`` (histogram buckets)."""

    metric: Literal["ttft", "itl", "tpot", "request", "queue"]
    threshold_seconds: float = Field(gt=0, allow_inf_nan=False)


class AvailabilitySLI(_Strict):
    """Good event: a request that finished with outcome=success."""


class TimesliceSLI(_Strict):
    """Good time slice: the interval's ``statistic`` of ``metric`` ≤ ``threshold_seconds``.

    ``statistic`` is ``mean`` (Δsum/Δcount, any source) or ``pNN`` (e.g. ``p99``: the
    quantile from Triton's latency summaries, which needs
    ``--metrics-config summary_latencies=true``).
    """

    metric: Literal["request", "queue"]
    statistic: str = Field(pattern=r"^(mean|p\d{1,2}(\.\d+)?)$")
    threshold_seconds: float = Field(gt=0, allow_inf_nan=False)

    @property
    def quantile(self) -> str | None:
        """The summary's ``quantile`` label value (``p99`` → ``0.99``) or None for mean."""
        if self.statistic == "mean":
            return None
        return format(float(self.statistic[1:]) / 100, "g")


_KINDS = ("latency", "availability", "timeslice", "goodput")


class SLI(_Strict):
    """Exactly one of ``latency``, ``availability``, ``timeslice`` or ``goodput``; the
    ``source`` (``metrics`` or ``traces``), ``goodput`` and ``sampling`` rules are in
    :mod:`.trace_sli`."""

    latency: LatencySLI | None = None
    availability: AvailabilitySLI | None = None
    timeslice: TimesliceSLI | None = None
    goodput: list[LatencySLI] | None = Field(None, min_length=1)
    source: Literal["metrics", "traces"] = "metrics"
    sampling: int = Field(1, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _exactly_one(self) -> SLI:
        given = [k for k in _KINDS if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of latency, availability, timeslice, goodput")
        check_source(given[0], self.source, self.sampling,
                     [o.metric for o in self.objectives()])
        return self

    @property
    def kind(self) -> str:
        """``"latency"``, ``"availability"``, ``"timeslice"`` or ``"goodput"``."""
        return next(k for k in _KINDS if getattr(self, k))

    def objectives(self) -> list[LatencySLI]:
        """The latency objectives a request must all meet (latency or goodput SLIs)."""
        return list(self.goodput or ([self.latency] if self.latency else []))


class Objective(_Strict):
    """OpenSLO objective: ``target`` as a ratio (0.99) or a percentage string ("99%")."""

    target: float

    @field_validator("target", mode="before")
    @classmethod
    def _percent(cls, v: object) -> object:
        if isinstance(v, str) and v.strip().endswith("%"):
            # in decimal: "99.9%" is 0.999, not 0.9990000000000001
            try:
                return float(Decimal(v.strip()[:-1].strip()) / 100)
            except (ArithmeticError, ValueError):  # decimal's InvalidOperation, Overflow
                raise ValueError(f"{v!r} is not a percentage (e.g. '99.9%')") from None
        return v

    @field_validator("target")
    @classmethod
    def _range(cls, v: float) -> float:
        if not 0 < v < 1:
            raise ValueError("target must be between 0 and 1 exclusive (e.g. 0.99 or '99%')")
        return v


class TimeWindow(_Strict):
    """OpenSLO time window; fleetwatch supports rolling windows."""

    duration: Duration
    is_rolling: bool = Field(True, alias="isRolling")

    @field_validator("duration", mode="before")
    @classmethod
    def _dur(cls, v: object) -> float:
        return parse_duration(v)  # type: ignore[arg-type]

    @field_validator("is_rolling")
    @classmethod
    def _rolling(cls, v: bool) -> bool:
        if not v:
            raise ValueError("only rolling windows are supported (isRolling: true)")
        return v


class Concurrency(_Strict):
    """The concurrency envelope: per-replica concurrency up to which the SLO is promised,
    and the bands (upper bounds, ascending) that condition events. Default bands: 1, 2,
    4, … up to twice the envelope."""

    envelope: float = Field(gt=0, allow_inf_nan=False)
    bands: list[float] = Field(default_factory=list)

    @model_validator(mode="after")
    def _bands(self) -> Concurrency:
        if not self.bands:
            bands, b = [], 1.0
            while b < self.envelope * 2:
                bands.append(b)
                b *= 2
            bands.append(b)
            if b >= 1e6:
                raise ValueError(f"envelope {self.envelope:g} is too large for the default "
                                 "bands (1, 2, 4, … up to twice the envelope: band labels "
                                 "have at most 6 digits); list 'bands:'")
            object.__setattr__(self, "bands", bands)
        if any(b <= 0 for b in self.bands) or sorted(set(self.bands)) != list(self.bands):
            raise ValueError("bands must be positive and strictly ascending")
        for b in self.bands:
            # a band is a label (band="4"), written with 6 significant digits: 1234567 and
            # 1234568 would both be "1.23457e+06", one series for two bands
            if not math.isfinite(b) or float(format(b, "g")) != b:
                raise ValueError(f"band {b!r} must be a finite number of at most 6 "
                                 "significant digits (it is a label value)")
        if self.envelope > self.bands[-1]:
            raise ValueError("envelope must not exceed the highest band")
        return self


class SLOSpec(_Strict):
    """One SLO (see module docstring)."""

    name: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9_.:-]+$")
    description: str = ""
    selector: Selector = Selector()
    sli: SLI
    objectives: list[Objective] = Field(min_length=1, max_length=1)
    time_window: list[TimeWindow] = Field(alias="timeWindow", min_length=1, max_length=1)
    budgeting_method: Literal["Occurrences", "Timeslices"] = Field("Occurrences",
                                                                   alias="budgetingMethod")
    concurrency: Concurrency

    @model_validator(mode="after")
    def _method_matches_sli(self) -> SLOSpec:
        timeslice = self.sli.kind == "timeslice"
        if timeslice != (self.budgeting_method == "Timeslices"):
            raise ValueError("budgetingMethod must be Timeslices for a timeslice SLI and "
                             "Occurrences otherwise")
        return self

    @property
    def objective(self) -> float:
        """The target as a ratio (0–1 exclusive)."""
        return self.objectives[0].target

    @property
    def period_seconds(self) -> float:
        """The rolling SLO period (error-budget window), in seconds."""
        return self.time_window[0].duration


class CapacitySettings(_Strict):
    """How capacity at SLO is learned: the burn-rate ``window`` it looks at, the events a
    band needs before it is trusted, and how many consecutive updates a new estimate must
    persist before it is adopted (hysteresis)."""

    window: Duration = 6 * 3600.0
    min_events: int = Field(200, ge=1)
    hysteresis_updates: int = Field(3, ge=1)

    @field_validator("window", mode="before")
    @classmethod
    def _dur(cls, v: object) -> float:
        return parse_duration(v)  # type: ignore[arg-type]


class AutoscalingSettings(_Strict):
    """Targets of the autoscaling components (each component = observed / target), and
    the cold-start floor: a model whose measured cold start (seconds from not ready to
    ready) exceeds ``cold_start_bound_seconds`` gets a recommended minimum of
    ``cold_start_min_replicas`` replicas (it cannot be scaled out in time).

    Missing or frozen data (:mod:`fleetwatch.slo.judge.freshness`, docs/autoscaling.md):
    a model whose target is down, whose scrape timed out, or whose engine is frozen
    (progress counters unchanged for ``frozen_after_scrapes`` scrapes in a row while its
    gauges say requests are running or waiting) keeps its last signal for ``stale_hold``
    (seconds, or "1m"), then reads ``stale_signal`` (a ratio; the default 1.0 is
    "at target": the replica counts as full, so the fleet never scales in on it).

    ``headroom_window`` (seconds, or "5m"; 0 turns it off): the window of the signal's
    burst headroom (:mod:`fleetwatch.slo.outputs.headroom`), by default Kubernetes'
    default scale-down stabilization window; set it to the ScaledObject's own
    ``scaleDown.stabilizationWindowSeconds`` when that differs.
    """

    queue_wait_seconds: float = Field(0.5, gt=0, allow_inf_nan=False)
    kv_cache_usage_ratio: float = Field(0.9, gt=0, le=1)
    gpu_memory_usage_ratio: float = Field(0.9, gt=0, le=1)
    cold_start_bound_seconds: float = Field(120.0, gt=0, allow_inf_nan=False)
    cold_start_min_replicas: int = Field(2, ge=1)
    stale_hold: Duration = 60.0
    stale_signal: float = Field(1.0, ge=0, allow_inf_nan=False)
    frozen_after_scrapes: int = Field(6, ge=2)
    headroom_window: Duration = 300.0

    @field_validator("stale_hold", mode="before")
    @classmethod
    def _hold(cls, v: object) -> float:
        return parse_duration(v)  # type: ignore[arg-type]

    @field_validator("headroom_window", mode="before")
    @classmethod
    def _headroom(cls, v: object) -> float:
        """A duration, or 0 (no headroom)."""
        if v == 0 or v == "0":
            return 0.0
        return parse_duration(v)  # type: ignore[arg-type]


class EngineLimits(_Strict):
    """Bounds of the SLO engine's state (docs/reliability.md).

    * ``max_models_per_slo`` — models one SLO tracks at most; a further model the SLO
      selects is not tracked (``fleetwatch_slo_models_refused_total{slo}``, one log line
      per SLO and minute) until a tracked one is forgotten;
    * ``forget_model_after`` — a model without data for this long (seconds, or "1h") is
      forgotten: its SLO states, window rows and gauges are freed (its events are no
      longer exported; Prometheus keeps their history).
    """

    max_models_per_slo: int = Field(2000, ge=1)
    forget_model_after: Duration = 3600.0

    @field_validator("forget_model_after", mode="before")
    @classmethod
    def _dur(cls, v: object) -> float:
        return parse_duration(v)  # type: ignore[arg-type]


class SLOFile(_Strict):
    """A whole SLO file."""

    windows: list[BurnWindow] = Field(default_factory=lambda: list(DEFAULT_WINDOWS))
    capacity: CapacitySettings = CapacitySettings()
    autoscaling: AutoscalingSettings = AutoscalingSettings()
    limits: EngineLimits = EngineLimits()
    slos: list[SLOSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> SLOFile:
        names = [s.name for s in self.slos]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"SLO names must be unique; repeated: {', '.join(dupes)}")
        # a window pair is an alert tier (burn_tier="1h/5m"): two with the same windows
        # would be two alerts with one identity, and the inhibitions could not order them
        seen: dict[tuple[float, float], int] = {}
        for i, w in enumerate(self.windows):
            j = seen.setdefault((w.long, w.short), i)
            if j != i:
                raise ValueError(f"windows[{i}] has the same long and short windows as "
                                 f"windows[{j}] ({w.name}); each pair is one alert tier")
        return self

    def for_role(self, role: str) -> SLOFile:
        """The file as a pool of ``role`` judges it: the SLOs whose selector covers the
        role (:meth:`Selector.covers_role`); the file itself when all do. Raises
        :class:`ValueError` when none does (a sidecar with no SLO to judge)."""
        kept = [s for s in self.slos if s.selector.covers_role(role)]
        if len(kept) == len(self.slos):
            return self
        if not kept:
            raise ValueError(f"no SLO's selector.roles covers role {role!r}")
        return self.model_copy(update={"slos": kept})

    def all_windows(self) -> list[float]:
        """Every distinct window length (seconds), ascending, plus the capacity window."""
        ws = {w.long for w in self.windows} | {w.short for w in self.windows}
        ws.add(self.capacity.window)
        return sorted(ws)


def parse_slo_file(data: object, source: str = "<memory>") -> SLOFile:
    """Validate parsed YAML; raise :class:`SLOSpecError` naming source, SLO and field."""
    if not isinstance(data, dict):
        raise SLOSpecError(f"{source}: expected a mapping with a 'slos:' list")
    where = _not_unicode(data)
    if where is not None:  # YAML's "\ud800" escape: no file or label can hold it
        raise SLOSpecError(f"{source}: {where or '(top level)'}: not valid Unicode text "
                           "(a lone surrogate escape such as \\ud800)")
    try:
        return SLOFile.model_validate(data)
    except ValidationError as exc:
        text = format_validation_error(exc, source)
        # name the SLO: slos[2] → slos[2] (name 'llm-ttft')
        given = data.get("slos")
        slos: list[object] = given if isinstance(given, list) else []

        def named(m: re.Match[str]) -> str:
            i = int(m.group(1))
            entry = slos[i] if i < len(slos) else None
            name = entry.get("name") if isinstance(entry, dict) else None
            return f"slos[{i}]" + (f" (name {name!r})" if name else "")

        raise SLOSpecError(re.sub(r"slos\[(\d+)\]", named, text)) from None


def _not_unicode(data: object, path: str = "") -> str | None:
    """The path (``slos[0].description``) of the first text in ``data`` with a lone
    surrogate, or None."""
    if isinstance(data, str):
        return None if data.isascii() or not any(
            0xD800 <= ord(c) <= 0xDFFF for c in data) else path
    if isinstance(data, dict):
        for k, v in data.items():
            sub = f"{path}.{k}" if path else str(k)
            found = _not_unicode(k, sub) if isinstance(k, str) else None
            found = found if found is not None else _not_unicode(v, sub)
            if found is not None:
                return found
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found = _not_unicode(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def load_slo_file(path: str | Path) -> SLOFile:
    """Read and validate an SLO YAML file; raises :class:`SLOSpecError`."""
    return parse_slo_file(read_yaml(path, SLOSpecError, "SLO file"), str(Path(path)))
