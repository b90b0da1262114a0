"""The span, as every module of :mod:`fleetwatch.traces` reads it: one value per OTLP span
(decoded from an export body by :mod:`fleetwatch.otlp.decode`)."""

from __future__ import annotations

from dataclasses import dataclass

#: An attribute value as decoded: OTLP ``AnyValue`` scalars (arrays and maps as text).
AttrValue = str | int | float | bool


@dataclass(frozen=True)
class Span:
    """One decoded span: ids as lower-case hex, times in Unix nanoseconds, attributes as
    scalars, events as ``(name, time_unix_nano)`` in the order sent; ``service`` is the
    resource's ``service.name`` and ``scope`` the instrumentation scope's name."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    events: tuple[tuple[str, int], ...]
    service: str = ""
    scope: str = ""
