"""The SLO engine's bounds under model-name churn (:mod:`fleetwatch.slo.account.limits`,
:class:`fleetwatch.slo.decode.decoder.Decoder`).

A churning upstream (``tests/support/churn_upstream.py``, a test double: 300 new model
names every scrape, each decoded, accounted and given a concurrency) is normalized and
fed to the engine for more scrapes than ``SLOEngine.MAX_MODELS`` names: the models held
(with data, gauges) stay within the cap while every model of the latest snapshot is kept,
the early evictions are counted, and the series carried while absent stay within the
decoder's bound.
"""

from __future__ import annotations

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.slo.decode.decoder import CARRIED_PER_SERIES, MIN_CARRIED
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.support.churn_upstream import churn_exposition

NAMES = 300


def _metric(engine: SLOEngine, name: str) -> float:
    return sum(v for n, _labels, v in engine.iter_metrics() if n == name)


def test_churning_model_names_stay_within_the_engines_caps():
    engine = SLOEngine(parse_slo_file({
        "slos": [{"name": "availability", "sli": {"availability": {}},
                  "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
                  "concurrency": {"envelope": 8}}]}))
    norm = Normalizer(TABLES["triton"])
    scrapes = engine.MAX_MODELS // NAMES + 5
    for n in range(scrapes):
        body = churn_exposition(n, NAMES)
        engine.update(Snapshot(1_000_000.0 + n, {"t": norm.normalize(body)}))
        held = engine.held()
        assert held.models <= engine.MAX_MODELS, (n, held)
        assert len(engine.concurrency) <= engine.MAX_MODELS
        assert held.carried_series <= max(MIN_CARRIED, CARRIED_PER_SERIES * 5 * NAMES), held
    latest = {mk.model for mk in engine.concurrency if mk.model.startswith(f"churn{n}_")}
    assert len(latest) == NAMES  # the current snapshot's models are never evicted
    seen = scrapes * NAMES
    assert seen > engine.MAX_MODELS
    assert _metric(engine, "fleetwatch_slo_models_evicted_total") == seen - engine.held().models
    assert held.states <= engine.spec.limits.max_models_per_slo
