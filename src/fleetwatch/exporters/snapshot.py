"""What the exporters hand to the SLO engine: typed snapshots, never re-parsed text.

A :class:`Snapshot` is one scrape cycle: its Unix timestamp and, per target, the
:class:`~fleetwatch.exporters.normalize.Normalized` state (``None`` when the target is
down). Consumers read series as :data:`SeriesKey` — sample name and label pairs — through
``Normalized.key(prefix)``, so nothing downstream parses exposition text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleetwatch.exporters.normalize import Normalized

#: ``(sample name, ((label, value), …))`` of one normalized series, labels in schema order
#: (e.g. ``("modelserver_request_duration_seconds_bucket", (("model", "m"), …, ("le",
#: "0.1")))``).
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class Snapshot:
    """One scrape cycle: Unix ``timestamp`` (seconds) and each target's normalized state
    (``None`` when the target is down); ``errors``: for a target that is down, why (the
    ``reason`` label of ``fleetwatch_upstream_scrape_errors_total``: ``timeout``,
    ``connection``, ``http_status``, …; a down target missing here is just down)."""

    timestamp: float
    targets: dict[str, Normalized | None]
    errors: dict[str, str] = field(default_factory=dict)
