"""The autoscaling signal's recent history, in bounded memory.

:class:`SignalHistory` keeps at most ``maxlen`` snapshots of every model's signal and
components, taken at most every ``step_seconds`` of engine time (360 × 10 s: the last
hour). It is fed when the engine updates (:meth:`SignalHistory.due` first, so an update
between two steps costs one comparison) and read when the page renders. Models not in
the latest snapshot keep their points until they age out of the ring.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from fleetwatch.page.model import HistoryPoint, Row, model_label, num


class SignalHistory:
    """A ring of ``(updated, {model label: point})`` snapshots (see the module doc)."""

    def __init__(self, maxlen: int = 360, step_seconds: float = 10.0) -> None:
        self.step_seconds = step_seconds
        self._ring: deque[tuple[float, dict[str, HistoryPoint]]] = deque(maxlen=maxlen)

    def __len__(self) -> int:
        return len(self._ring)

    def due(self, updated: float | None) -> bool:
        """True when a snapshot taken at ``updated`` (engine Unix seconds) would be
        recorded: at least ``step_seconds`` after the last one."""
        if updated is None:
            return False
        return not self._ring or updated >= self._ring[-1][0] + self.step_seconds

    def record(self, updated: float | None, models: Iterable[Row]) -> bool:
        """Record one ``/autoscaling`` snapshot (its ``updated`` stamp and ``models``
        rows) when :meth:`due`; True when it was recorded."""
        if updated is None or not self.due(updated):
            return False
        points: dict[str, HistoryPoint] = {}
        for row in models:
            comps = row.get("components") or {}
            points[model_label(row)] = {
                "t": updated, "signal": num(row.get("signal")) or 0.0,
                "components": {str(k): v for k, v in comps.items() if num(v) is not None}}
        self._ring.append((updated, points))
        return True

    def series(self) -> dict[str, list[HistoryPoint]]:
        """Per model label its points, oldest first."""
        out: dict[str, list[HistoryPoint]] = {}
        for _, points in self._ring:
            for label, point in points.items():
                out.setdefault(label, []).append(point)
        return out
