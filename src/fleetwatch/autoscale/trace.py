"""Request traces: the typed request record, the readers of the Azure LLM inference trace
and of aiperf's mooncake JSONL, the mooncake writer, segment selection, and the one
mapping from a production trace to what one replica here can serve.

Formats:

* **Azure LLM inference trace** (Azure Public Dataset, ``data/AzureLLMInferenceTrace_code.csv``
  and ``_conv.csv``, described in its ``AzureLLMInferenceDataset2023.md``): a CSV with the
  header ``TIMESTAMP,ContextTokens,GeneratedTokens``; ``TIMESTAMP`` is a wall-clock time
  ``YYYY-MM-DD HH:MM:SS.fffffff`` (up to 7 fractional digits), the token columns are
  non-negative integers. Arrivals are made relative to the first request.
* **mooncake JSONL** as aiperf reads it (``aiperf`` ``dataset/loader/models.py``,
  ``MooncakeTrace``; ``--custom-dataset-type mooncake_trace`` with ``--fixed-schedule``):
  one JSON object per line with ``timestamp`` (milliseconds, int or float),
  ``input_length`` and ``output_length`` (tokens). Other fields (``hash_ids``, …) are
  ignored by the reader and not written.

A malformed line raises :class:`TraceError` naming the line (1-based) and the field; no
partial trace is returned.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = ["AZURE_HEADER", "Request", "TraceError", "TraceMapping", "map_trace",
           "read_azure_csv", "read_mooncake_jsonl", "segment", "write_mooncake_jsonl"]

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(ValueError):
    """A trace that cannot be read: the message names the line and the field."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a trace: ``arrival`` in seconds from the trace's start (≥ 0),
    ``input_tokens`` (prompt length) and ``output_tokens`` (generated length), tokens."""

    arrival: float
    input_tokens: int
    output_tokens: int


def _azure_time(text: str, line: int) -> float:
    """Seconds since the epoch of an Azure ``TIMESTAMP`` (naive, read as UTC)."""
    head, _, frac = text.strip().partition(".")
    try:
        base = datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
        sub = float("0." + frac) if frac else 0.0
        if frac and not frac.isdigit():
            raise ValueError(frac)
    except ValueError:
        raise TraceError(f"line {line}: TIMESTAMP {text!r} is not YYYY-MM-DD HH:MM:SS.f") from None
    return (base - datetime(1970, 1, 1)).total_seconds() + sub


def _tokens(text: object, line: int, field: str) -> int:
    """A non-negative token count, or :class:`TraceError`."""
    if isinstance(text, bool):
        raise TraceError(f"line {line}: {field} {text!r} is not a token count")
    try:
        value = int(text) if isinstance(text, (int, str)) else int(str(text))
    except ValueError:
        raise TraceError(f"line {line}: {field} {text!r} is not a token count") from None
    if value < 0:
        raise TraceError(f"line {line}: {field} {value} is negative")
    return value


def _relative(rows: list[tuple[float, int, int]]) -> list[Request]:
    """Requests sorted by arrival, arrivals made relative to the first one."""
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0] if rows else 0.0
    return [Request(t - t0, i, o) for t, i, o in rows]


def read_azure_csv(lines: Iterable[str]) -> list[Request]:
    """The requests of an Azure LLM inference trace CSV (``lines``: the file's lines,
    header first), sorted by arrival, arrivals in seconds from the first request.
    Raises :class:`TraceError` for a wrong header, a bad timestamp or token count."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise TraceError("empty: neither an Azure trace CSV (header "
                         f"{','.join(AZURE_HEADER)}) nor a mooncake JSONL")
    if tuple(h.strip() for h in header) != AZURE_HEADER:
        raise TraceError(f"line 1: header {header!r} is not {','.join(AZURE_HEADER)}")
    rows: list[tuple[float, int, int]] = []
    for n, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != 3:
            raise TraceError(f"line {n}: {len(row)} fields, expected 3 ({','.join(AZURE_HEADER)})")
        rows.append((_azure_time(row[0], n), _tokens(row[1].strip(), n, "ContextTokens"),
                     _tokens(row[2].strip(), n, "GeneratedTokens")))
    return _relative(rows)


def read_mooncake_jsonl(lines: Iterable[str]) -> list[Request]:
    """The requests of a mooncake JSONL trace (``timestamp`` ms, ``input_length``,
    ``output_length``), sorted by arrival, in seconds from the first request. Blank
    lines are skipped; raises :class:`TraceError` for a line that is not a JSON object
    or lacks a field, or a timestamp that is not a finite number."""
    rows: list[tuple[float, int, int]] = []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(f"line {n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TraceError(f"line {n}: not a JSON object")
        for field in ("timestamp", "input_length", "output_length"):
            if field not in obj:
                raise TraceError(f"line {n}: no {field}")
        ts = obj["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise TraceError(f"line {n}: timestamp {ts!r} is not a number of milliseconds")
        rows.append((ts / 1000.0, _tokens(obj["input_length"], n, "input_length"),
                     _tokens(obj["output_length"], n, "output_length")))
    return _relative(rows)


def write_mooncake_jsonl(requests: Iterable[Request]) -> str:
    """The requests as mooncake JSONL for aiperf's fixed schedule: one line per request
    with ``timestamp`` (integer milliseconds, rounded), ``input_length`` and
    ``output_length`` (an output of 0 tokens is written as 1: aiperf requires > 0)."""
    return "".join(
        json.dumps({"timestamp": round(r.arrival * 1000.0), "input_length": r.input_tokens,
                    "output_length": max(1, r.output_tokens)}) + "\n"
        for r in requests)


def segment(requests: Sequence[Request], start: float, duration: float) -> list[Request]:
    """The requests arriving in ``[start, start + duration)`` (seconds from the trace's
    start), arrivals shifted so that the segment starts at 0. Raises ``ValueError``
    for a negative start or a non-positive duration."""
    if start < 0 or not duration > 0:
        raise ValueError(f"segment {start}:{duration}: start must be ≥ 0 and duration > 0")
    end = start + duration
    return [Request(r.arrival - start, r.input_tokens, r.output_tokens)
            for r in requests if start <= r.arrival < end]


@dataclass(frozen=True, slots=True)
class TraceMapping:
    """How a production trace is mapped onto what one replica here can serve.

    * ``time_compression`` (≥ 1): trace seconds per replay second; arrivals are divided
      by it, so the arrival *rate* is multiplied by it. Every duration of the autoscaler
      (HPA periods, stabilization windows, scrape and poll intervals, cold start) is
      divided by the same factor so that decisions keep their place relative to bursts.
    * ``token_scale`` (> 0): tokens here per trace token, applied to input lengths, and
      to output lengths unless ``output_token_scale`` is given (a replica here is smaller
      than the production one; prompts shrink more than outputs, which are short);
    * ``min_input_tokens``/``max_input_tokens`` and ``min_output_tokens``/
      ``max_output_tokens``: the clamp applied after scaling (the engine's context
      length, at least one output token).
    """

    time_compression: float = 1.0
    token_scale: float = 1.0
    output_token_scale: float | None = None
    min_input_tokens: int = 1
    max_input_tokens: int = 1_000_000
    min_output_tokens: int = 1
    max_output_tokens: int = 1_000_000

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_compression) and self.time_compression >= 1.0):
            raise ValueError(f"time_compression {self.time_compression}: must be ≥ 1")
        if not (math.isfinite(self.token_scale) and self.token_scale > 0):
            raise ValueError(f"token_scale {self.token_scale}: must be > 0")
        out = self.output_token_scale
        if out is not None and not (math.isfinite(out) and out > 0):
            raise ValueError(f"output_token_scale {out}: must be > 0")
        if not 1 <= self.min_input_tokens <= self.max_input_tokens:
            raise ValueError("need 1 ≤ min_input_tokens ≤ max_input_tokens")
        if not 1 <= self.min_output_tokens <= self.max_output_tokens:
            raise ValueError("need 1 ≤ min_output_tokens ≤ max_output_tokens")

    def seconds(self, trace_seconds: float) -> float:
        """A duration of the production system (an HPA period, a window, a cold start)
        in replay seconds: ``trace_seconds / time_compression``."""
        return trace_seconds / self.time_compression


def _clamp(value: float, low: int, high: int) -> int:
    return min(high, max(low, round(value)))


def map_trace(requests: Iterable[Request], mapping: TraceMapping) -> list[Request]:
    """The one mapping from a production trace to the replay here: arrival ÷
    ``time_compression``; input tokens × ``token_scale``, output tokens ×
    ``output_token_scale`` (default ``token_scale``), rounded, clamped to the mapping's
    bounds. Order and count are kept (no request is dropped)."""
    m = mapping
    c, s = m.time_compression, m.token_scale
    so = s if m.output_token_scale is None else m.output_token_scale
    return [Request(r.arrival / c,
                    _clamp(r.input_tokens * s, m.min_input_tokens, m.max_input_tokens),
                    _clamp(r.output_tokens * so, m.min_output_tokens, m.max_output_tokens))
            for r in requests]
