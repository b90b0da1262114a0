"""The state snapshot: a :class:`~.records.Recovered` as a versioned JSON document.

Shape (``version`` :data:`VERSION`; counts in events, times in Unix seconds, capacities in
requests, window lengths and bucket bounds in seconds, written as JSON object keys)::

    {"format": "fleetwatch-slo-state", "version": 1, "saved": 1765000000.0, "buckets": 60,
     "states": [{"slo": "llm-ttft", "model": "tiny-llm", "model_version": "",
                 "backend": "vllm", "capacity": 8.0, "capacity_evidence": "bands",
                 "capacity_predicted": null, "pending_capacity": null, "pending_count": 0,
                 "bands": {"8": {"good": 410.0, "total": 414.0,
                                 "windows": {"300.0": [[352941176, 12.0, 12.0]]},
                                 "evidence": {"origin": …, "count": …, "conc": …,
                                              "buckets": {"0.1": 12.0, "inf": 12.0}}}}}]}

:func:`decode` trusts nothing: a document of another ``format`` (foreign) or ``version``,
not JSON, or with a value out of its domain (a count negative or not finite, a capacity
≤ 0) raises :class:`SnapshotError` saying which, and no part of it is used.
"""

from __future__ import annotations

import json
import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetwatch.slo.recover.records import (
    BandEvidence,
    BandRecord,
    Recovered,
    StateRecord,
)
from fleetwatch.slo.state import ModelKey

#: The ``format`` of a snapshot document.
FORMAT = "fleetwatch-slo-state"
#: The version written, and the only one read.
VERSION = 1

_Count = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Time = Annotated[float, Field(allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class SnapshotError(ValueError):
    """A snapshot that is not used (message: why)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class _Evidence(_Strict):
    origin: _Time
    count: _Count
    conc: _Count
    buckets: dict[float, _Count] = Field(default_factory=dict)


class _Band(_Strict):
    good: _Count
    total: _Count
    windows: dict[_Positive, list[tuple[int, _Count, _Count]]] = Field(default_factory=dict)
    evidence: _Evidence | None = None


class _State(_Strict):
    slo: str
    model: str
    model_version: str
    backend: str
    capacity: _Positive
    capacity_evidence: str
    capacity_predicted: _Positive | None = None
    pending_capacity: _Positive | None = None
    pending_count: int = Field(0, ge=0)
    bands: dict[str, _Band] = Field(default_factory=dict)


class _Document(_Strict):
    format: str
    version: int
    saved: _Time
    buckets: int = Field(gt=0)
    states: list[_State]


def _key(le: float) -> str:
    return "inf" if le == math.inf else repr(le)


def encode(rec: Recovered) -> bytes:
    """The snapshot document of ``rec`` (UTF-8 JSON; fleet capacities are not kept: they
    are the fleet's, asked again at each start)."""
    states = []
    for (slo, mk), r in sorted(rec.states.items()):
        bands = {}
        for band, b in r.bands.items():
            ev = b.evidence
            bands[band] = {
                "good": b.good, "total": b.total,
                "windows": {_key(w): [list(c) for c in counts]
                            for w, counts in b.windows.items()},
                "evidence": None if ev is None else {
                    "origin": ev.origin, "count": ev.count, "conc": ev.conc,
                    "buckets": {_key(le): c for le, c in ev.buckets.items()}}}
        states.append({"slo": slo, "model": mk.model, "model_version": mk.model_version,
                       "backend": mk.backend, "capacity": r.capacity,
                       "capacity_evidence": r.capacity_evidence,
                       "capacity_predicted": r.capacity_predicted,
                       "pending_capacity": r.pending_capacity,
                       "pending_count": r.pending_count, "bands": bands})
    doc = {"format": FORMAT, "version": VERSION, "saved": rec.saved, "buckets": rec.buckets,
           "states": states}
    return json.dumps(doc, allow_nan=False, separators=(",", ":")).encode()


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "document"
    return f"{where}: {err['msg']}"


def decode(body: bytes) -> Recovered:
    """The recovery of a snapshot document (``source`` ``snapshot``). Raises
    :class:`SnapshotError`: not JSON, a foreign ``format``, another ``version``, or a
    field out of its domain (the message names the first)."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise SnapshotError(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise SnapshotError(f"not a fleetwatch SLO state snapshot (format {got!r:.60})")
    if raw.get("version") != VERSION:
        raise SnapshotError(f"version {raw.get('version')!r:.20} (this fleetwatch reads "
                            f"version {VERSION})")
    try:
        doc = _Document.model_validate(raw)
    except ValidationError as exc:
        raise SnapshotError(_first_error(exc)) from None
    out = Recovered("snapshot", doc.saved, doc.buckets)
    for s in doc.states:
        bands = {}
        for label, b in s.bands.items():
            ev = b.evidence
            bands[label] = BandRecord(
                b.good, b.total, {w: list(cs) for w, cs in b.windows.items()},
                None if ev is None else BandEvidence(ev.origin, ev.count, ev.conc,
                                                     dict(ev.buckets)))
        out.states[(s.slo, ModelKey(s.model, s.model_version, s.backend))] = StateRecord(
            s.capacity, s.capacity_evidence, s.capacity_predicted, s.pending_capacity,
            s.pending_count, bands)
    return out
