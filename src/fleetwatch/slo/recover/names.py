"""The series a recovery reads from Prometheus, by name (no imports: the rule generator
names the fleet capacity from here without loading the engine)."""

from __future__ import annotations

EVENTS = "fleetwatch_slo_events_total"
GOOD = "fleetwatch_slo_good_events_total"
CAPACITY = "fleetwatch_slo_capacity_concurrency"
PREDICTED = "fleetwatch_slo_capacity_predicted_concurrency"
BAND_CONCURRENCY = "fleetwatch_slo_band_concurrency"
BAND_QUANTILE = "fleetwatch_slo_band_latency_quantile_seconds"
#: The recorded fleet capacity per (SLO, model): the smallest over the replicas
#: (:mod:`fleetwatch.alerts.recording` generates its rule).
FLEET_CAPACITY = "slo_model:fleetwatch_slo_capacity_concurrency:min"
