"""Every family that carries ``dp_rank`` says how it aggregates across data-parallel ranks."""

from __future__ import annotations

from fleetwatch.labels.dp_aggregation import BY_FAMILY, dp_aggregation
from fleetwatch.labels.schema import METRICS, METRICS_BY_NAME, series_labels


def test_every_family_with_dp_rank_has_a_rule():
    carrying = [m for m in METRICS if "dp_rank" in series_labels(m)]
    assert carrying
    missing = [m.name for m in carrying if dp_aggregation(m) is None]
    assert missing == []


def test_rows_name_schema_families_and_summaries_never_aggregate():
    assert set(BY_FAMILY) <= set(METRICS_BY_NAME)
    for m in METRICS:
        if m.type == "summary" and "dp_rank" in series_labels(m):
            rule = dp_aggregation(m)
            assert rule is not None and rule.how == "none", m.name
