"""The autoscaling signal's recent history, in bounded memory.

:class:`SignalHistory` keeps at most ``maxlen`` snapshots of every model's signal and
components, taken at most every ``step_seconds`` of engine time (360 × 10 s: the last
hour). It is fed when the engine updates (:meth:`SignalHistory.due` first, so an update
between two steps costs one comparison) and read when the page renders. Models not in
the latest snapshot keep their points until they age out of the ring.

The ring also holds at most ``max_points`` points in all (:data:`MAX_POINTS`): under
model-name churn every snapshot names other models, and ``maxlen`` snapshots of thousands
of models each would hold millions of points for models long gone. Past it the oldest
snapshots are dropped (the history is shorter, never wrong); the newest is always kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from fleetwatch.page.model import HistoryPoint, Row, model_label, num

#: Points (one model at one snapshot) the history holds at most: the full hour of
#: 360 steps for up to 277 models, a shorter one for more.
MAX_POINTS = 100_000


class SignalHistory:
    """A ring of ``(updated, {model label: point})`` snapshots (see the module doc)."""

    def __init__(self, maxlen: int = 360, step_seconds: float = 10.0,
                 max_points: int = MAX_POINTS) -> None:
        self.step_seconds = step_seconds
        self.max_points = max_points
        self._ring: deque[tuple[float, dict[str, HistoryPoint]]] = deque(maxlen=maxlen)
        self._points = 0  # points in the ring

    @property
    def points(self) -> int:
        """Points held (≤ ``max_points`` unless the newest snapshot alone has more)."""
        return self._points

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
        if len(self._ring) == self._ring.maxlen:
            self._points -= len(self._ring[0][1])  # the append drops it
        self._ring.append((updated, points))
        self._points += len(points)
        while self._points > self.max_points and len(self._ring) > 1:
            self._points -= len(self._ring.popleft()[1])
        return True

    def series(self) -> dict[str, list[HistoryPoint]]:
        """Per model label its points, oldest first."""
        out: dict[str, list[HistoryPoint]] = {}
        for _, points in self._ring:
            for label, point in points.items():
                out.setdefault(label, []).append(point)
        return out
