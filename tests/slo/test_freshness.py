"""Missing or frozen data never reads as idle (slo/judge/freshness.py): a model whose target
is down, whose scrape timed out, or whose engine is frozen (counters still while its
gauges say requests run and wait) holds its last signal for ``autoscaling.stale_hold``,
then reads ``autoscaling.stale_signal``; ``/autoscaling`` and the metrics say ``stale``,
why and since when; fresh data makes it fresh again.

The data is a real vLLM concurrency sweep (tests/data/vllm-sweep/: 1 → 16 concurrent
requests against ``--max-num-seqs 8``); the snapshots get the test's own timestamps (the
engine's clock), 5 s apart, so holds are exact and nothing depends on the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleetwatch.commands.slo_replay import normalizer_for
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.normalized import Normalized
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.labels.schema import METRICS
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.judge.freshness import PROGRESS_FAMILIES, ProgressReader
from fleetwatch.slo.outputs.status import autoscaling_document
from fleetwatch.slo.spec import parse_slo_file
from tests.support.churn_upstream import churn_exposition
from tests.support.helpers import ROOT

CAPTURES = sorted((ROOT / "tests/data/vllm-sweep/captures").glob("*.prom"))
STEP = 5.0
T0 = 1_800_000_000.0
HOLD = 30.0
SATURATED = 1.5
FROZEN_AFTER = 3
METRICS_INDEX = {m.name: i for i, m in enumerate(METRICS)}


def _engine() -> SLOEngine:
    doc = yaml.safe_load((ROOT / "src/fleetwatch/demo/slos.yaml").read_text())
    doc["autoscaling"] = {"stale_hold": f"{HOLD:g}s", "stale_signal": SATURATED,
                          "frozen_after_scrapes": FROZEN_AFTER}
    return parse_slo_file(doc)


def _busy_captures() -> list[Normalized]:
    """The sweep up to its last capture under load (7 running, 8 waiting), normalized."""
    normalize = normalizer_for("vllm")
    out = [normalize(p.read_text(), p.name) for p in CAPTURES[:20]]
    last = out[-1]
    assert sum(v for k, v in last.samples() if k.startswith("modelserver_requests_active")) \
        > 0
    return out


class Feed:
    """Snapshots of one target ``vllm`` at T0, T0 + 5 s, …"""

    def __init__(self) -> None:
        self.engine = SLOEngine(_engine())
        self.t = T0

    def up(self, n: Normalized) -> None:
        self.engine.update(Snapshot(self.t, {"vllm": n}))
        self.t += STEP

    def down(self, reason: str) -> None:
        self.engine.update(Snapshot(self.t, {"vllm": None}, {"vllm": reason}))
        self.t += STEP

    def model(self) -> dict:
        [obj] = [o for o in self.engine.autoscaling() if o["model"] == "tiny-llm"]
        return obj

    def stale_series(self) -> dict[str, float]:
        return {lab["reason"]: v for name, lab, v in self.engine.iter_metrics()
                if name == "fleetwatch_autoscaling_signal_stale" and lab["model"] == "tiny-llm"}


@pytest.fixture(scope="module")
def captures() -> list[Normalized]:
    return _busy_captures()


@pytest.mark.parametrize(("error", "reason"), [("connection", "target_down"),
                                               ("http_status", "target_down"),
                                               ("timeout", "scrape_timeout")])
def test_a_target_down_holds_then_saturates_then_recovers(captures, error, reason):
    feed = Feed()
    for n in captures[:-1]:
        feed.up(n)
    fresh = feed.model()
    assert fresh["freshness"] == {"state": "fresh", "reason": None, "since": None,
                                  "updated": feed.t - STEP, "signal": "measured"}
    last_good, measured = feed.t - STEP, fresh["signal"]
    assert measured > 0
    assert feed.stale_series() == {"target_down": 0.0, "scrape_timeout": 0.0, "frozen": 0.0}
    down_at = feed.t
    feed.down(error)
    obj = feed.model()
    assert obj["freshness"] == {"state": "stale", "reason": reason, "since": down_at,
                                "updated": last_good, "signal": "held"}
    assert obj["signal"] == measured
    assert autoscaling_document(feed.engine)["updated"] == last_good  # not the current time
    assert feed.stale_series()[reason] == 1.0
    assert sum(feed.stale_series().values()) == 1.0
    while feed.engine.last_update - down_at < HOLD:  # held for the whole hold …
        assert feed.model()["signal"] == measured
        feed.down(error)
    obj = feed.model()  # … then saturated
    assert feed.engine.last_update - down_at >= HOLD
    assert obj["signal"] == SATURATED and obj["freshness"]["signal"] == "saturated"
    assert obj["freshness"]["since"] == down_at and obj["freshness"]["updated"] == last_good
    feed.up(captures[-1])  # the target answers again with fresh counters
    obj = feed.model()
    assert obj["freshness"]["state"] == "fresh" and obj["freshness"]["signal"] == "measured"
    assert obj["freshness"]["updated"] == feed.t - STEP
    assert sum(feed.stale_series().values()) == 0.0


def test_frozen_counters_with_requests_in_flight_hold_then_saturate(captures):
    feed = Feed()
    for n in captures:
        feed.up(n)
    measured, last_good = feed.model()["signal"], feed.t - STEP
    frozen_from = feed.t
    for i in range(FROZEN_AFTER - 1):  # the same exposition again: counters still
        feed.up(captures[-1])
        assert feed.model()["freshness"]["state"] == "fresh", i
    feed.up(captures[-1])
    obj = feed.model()
    assert obj["freshness"] == {"state": "stale", "reason": "frozen", "since": frozen_from,
                                "updated": last_good, "signal": "held"}
    assert obj["signal"] == measured
    assert feed.stale_series()["frozen"] == 1.0
    while feed.engine.last_update - frozen_from < HOLD:
        assert feed.model()["signal"] == measured
        feed.up(captures[-1])
    obj = feed.model()
    assert obj["signal"] == SATURATED and obj["freshness"]["reason"] == "frozen"
    assert obj["freshness"]["signal"] == "saturated"
    # the engine moves again (the sweep's next captures: counters far above)
    feed.up(_rerun(captures[-1]))
    assert feed.model()["freshness"]["state"] == "fresh"
    assert feed.stale_series()["frozen"] == 0.0


def test_an_idle_engine_with_still_counters_stays_fresh():
    """Counters that do not move while no request runs or waits are an idle model."""
    normalize = normalizer_for("vllm")
    idle = normalize(CAPTURES[0].read_text(), CAPTURES[0].name)
    assert all(v == 0 for k, v in idle.samples() if k.startswith("modelserver_requests_active"))
    feed = Feed()
    for _ in range(FROZEN_AFTER * 4):
        feed.up(idle)
    assert feed.model()["freshness"]["state"] == "fresh"
    assert feed.model()["freshness"]["updated"] == feed.t - STEP


def _rerun(n: Normalized) -> Normalized:
    """The last busy capture with every request counter one higher (an engine moving
    again), normalized by a fresh normalizer."""
    path = CAPTURES[19]
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("vllm:request_success_total{") and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            line = f"{name} {float(value) + 1}"
        lines.append(line)
    return normalizer_for("vllm")("\n".join(lines) + "\n", Path(path).name)


def _churn(cycles: int, names: int = 300) -> list[Normalized]:
    """``cycles`` expositions of an upstream that renames all its ``names`` models every
    scrape (tests/support/churn_upstream.py), normalized as a sidecar does."""
    norm = Normalizer(TABLES["triton"])
    return [norm.normalize(churn_exposition(n, names)) for n in range(cycles)]


def _progress_series(n: Normalized) -> int:
    return sum(len(n.families[METRICS_INDEX[name]])
               for name in (*PROGRESS_FAMILIES, "modelserver_requests_active"))


def test_the_prefix_cache_stays_bounded_under_model_name_churn():
    """Label churn must not grow the reader: after many expositions of new names it holds
    at most its bound of the last exposition's series, never every name seen."""
    reader = ProgressReader()
    expositions = _churn(60)
    per_scrape = _progress_series(expositions[0])
    assert per_scrape >= 600  # requests, batch items and pending requests per model
    bound = max(ProgressReader.CACHE_SLACK * per_scrape,
                per_scrape + ProgressReader.CACHE_FLOOR)
    seen = 0
    for n in expositions:
        reader.read(n)
        seen += _progress_series(n)
        assert reader.cached <= bound
    assert seen > 3 * bound  # the names seen would not have fitted
    assert reader.evicted >= seen - bound


def test_an_evicted_prefix_reads_as_before():
    """Eviction only forgets lookups: a reader that evicted reads what a new one reads."""
    expositions = _churn(50, names=200)
    reader = ProgressReader()
    for n in expositions:
        reader.read(n)
    assert reader.evicted > 0
    again = expositions[5]  # its prefixes were evicted long ago
    got = reader.read(again)
    assert got == ProgressReader().read(again)
    assert len(got) == 200 and all(p.counters > 0 for p in got.values())


def test_the_engine_keeps_one_bounded_reader_per_target():
    """Through the SLO engine, with two targets churning: one reader each, each bounded
    by its own target's exposition (one target's reads do not evict the other's)."""
    engine = SLOEngine(_engine())
    a, b = _churn(45, names=150), _churn(45, names=150)
    for i, (na, nb) in enumerate(zip(a, b, strict=True)):
        engine.update(Snapshot(T0 + STEP * i, {"a": na, "b": nb}))
    readers = engine.freshness.readers
    assert sorted(readers) == ["a", "b"]
    per_scrape = _progress_series(a[0])
    for reader in readers.values():
        assert reader.cached <= max(ProgressReader.CACHE_SLACK * per_scrape,
                                    per_scrape + ProgressReader.CACHE_FLOOR)
        assert reader.evicted > 0


def test_a_down_target_is_one_log_line_however_many_models_it_had(caplog):
    """A target of 300 models going down is one warning line (not 300), naming the target,
    the count and a few models; its coming back is one info line."""
    engine = SLOEngine(_engine())
    [same] = _churn(1, names=300)
    engine.update(Snapshot(T0, {"triton": same}))
    caplog.set_level("INFO", logger="fleetwatch.slo.freshness")
    engine.update(Snapshot(T0 + STEP, {"triton": None}, {"triton": "ConnectionRefused"}))
    stale = [r.getMessage() for r in caplog.records if "data stale" in r.getMessage()]
    assert len(stale) == 1, stale
    assert stale[0].startswith("300 models (churn0_0 v1, churn0_1 v1, churn0_10 v1 and 297 more): "
                               "data stale (target triton is down)"), stale[0]
    assert all(o["freshness"]["state"] == "stale" for o in engine.autoscaling())
    caplog.clear()
    engine.update(Snapshot(T0 + 2 * STEP, {"triton": same}))
    back = [r.getMessage() for r in caplog.records if "fresh again" in r.getMessage()]
    # the models with nothing in flight are fresh at once; a busy one waits for its
    # counters to move (the same exposition again: they did not)
    fresh = sorted(f"{o['model']} v{o['model_version']}" for o in engine.autoscaling()
                   if o["freshness"]["state"] == "fresh")
    assert 1 < len(fresh) < 300
    assert back == [f"{len(fresh)} models of target triton ({', '.join(fresh[:3])} and "
                    f"{len(fresh) - 3} more): data fresh again (was stale: target_down)"]
