"""The sidecar's side of restarts: the configuration, the snapshot file (atomic, never
trusted), the choice at start with its one log line, and a recovery that fails starting
cold within the timeout."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time

import pytest

from fleetwatch.sidecar import recover as rc
from fleetwatch.sidecar.config import ConfigError, parse_config
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.slo.recover.test_snapshot import _learned
from tests.slo.test_engine import SLOS

TARGETS = [{"name": "t", "kind": "vllm", "url": "http://127.0.0.1:1/metrics"}]


def _cfg(**extra):  # type: ignore[no-untyped-def]
    return parse_config({"targets": TARGETS, **extra})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port  # nothing listens once closed


@pytest.mark.parametrize("section,message", [
    ({"slo": {"recover": {"prometheus": "http://p:9090"}}}, "match is required with prometheus"),
    ({"slo": {"recover": {"prometheus": "http://p:9090", "match": {"a-b": "x"}}}},
     "not a Prometheus label name"),
    ({"slo": {"recover": {"timeout_seconds": 0}}}, "slo.recover.timeout_seconds"),
    ({"slo": {"recover": {"prometheus": "not a url", "match": {"pod": "x"}}}},
     "slo.recover.prometheus"),
    ({"shutdown": {"drain_seconds": -1}}, "shutdown.drain_seconds"),
    ({"shutdown": {"drain": 5}}, "shutdown.drain"),
    ({"state_dir": ""}, "state_dir"),
])
def test_a_bad_state_section_is_an_error_naming_the_field(section, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"targets": TARGETS, **section}, "sidecar.yaml")


def test_a_snapshot_is_written_atomically_and_read_back(tmp_path):
    rec = _learned().engine.snapshot()
    path = rc.write_snapshot(str(tmp_path), rec)
    assert sorted(p.name for p in tmp_path.iterdir()) == [rc.SNAPSHOT_FILE]  # no temp left
    got = rc.read_snapshot(str(tmp_path), rec.saved + 10, 900)
    assert got.states.keys() == rec.states.keys() and got.source == "snapshot"
    assert path.read_bytes() == rc.write_snapshot(str(tmp_path), got).read_bytes()


@pytest.mark.parametrize("body,reason", [
    (b'{"format": "fleetwatch-slo-state", "vers', "not JSON"),
    (b'{"format": "other", "version": 1}', "not a fleetwatch SLO state snapshot"),
    (b'{"format": "fleetwatch-slo-state", "version": 99}', "version 99"),
])
def test_a_bad_snapshot_is_ignored_saying_why(tmp_path, body, reason):
    (tmp_path / rc.SNAPSHOT_FILE).write_bytes(body)
    with pytest.raises(rc.RecoverError, match=f"snapshot .* ignored: {reason}"):
        rc.read_snapshot(str(tmp_path), time.time(), 900)


def test_an_old_snapshot_is_not_used(tmp_path):
    rec = _learned().engine.snapshot()
    rc.write_snapshot(str(tmp_path), rec)
    with pytest.raises(rc.RecoverError, match="saved 1000 s ago"):
        rc.read_snapshot(str(tmp_path), rec.saved + 1000, 900)


def _engine() -> SLOEngine:
    return SLOEngine(parse_slo_file(SLOS))


def test_a_fresh_snapshot_restores_the_engine_with_one_log_line(tmp_path, caplog):
    a = _learned()
    rc.write_snapshot(str(tmp_path), a.engine.snapshot())
    engine = _engine()
    with caplog.at_level(logging.INFO, "fleetwatch.recover"):
        rec = asyncio.run(rc.recover(_cfg(state_dir=str(tmp_path)), engine, a.t + 5))
    assert rec is not None and rec.source == "snapshot" and len(rec.states) == 2
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith(
        f"SLO state recovered from snapshot {tmp_path / rc.SNAPSHOT_FILE} (saved 5 s ago, "
        "2 states, 0 fleet capacities)"), lines


def test_an_unreachable_prometheus_and_a_corrupt_snapshot_start_cold(tmp_path, caplog):
    (tmp_path / rc.SNAPSHOT_FILE).write_bytes(b"\x00garbage")
    cfg = _cfg(state_dir=str(tmp_path), slo={"recover": {
        "prometheus": f"http://127.0.0.1:{_closed_port()}", "match": {"pod": "p"},
        "timeout_seconds": 5}})
    with caplog.at_level(logging.INFO, "fleetwatch.recover"):
        assert asyncio.run(rc.recover(cfg, _engine(), time.time())) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("SLO state starts cold: snapshot ") \
        and "ignored: not JSON" in lines[0] and "cannot query Prometheus" in lines[0], lines


def test_a_prometheus_that_does_not_answer_never_delays_the_start_beyond_the_timeout(caplog):
    with socket.socket() as s:  # accepts connections (the backlog) and never answers
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        cfg = _cfg(slo={"recover": {"prometheus": f"http://127.0.0.1:{s.getsockname()[1]}",
                                    "match": {"pod": "p"}, "timeout_seconds": 0.5}})
        with caplog.at_level(logging.INFO, "fleetwatch.recover"):
            assert asyncio.run(asyncio.wait_for(rc.recover(cfg, _engine(), time.time()),
                                                60)) is None
    assert "did not answer within slo.recover.timeout_seconds (0.5 s)" in caplog.text


def test_an_unset_variable_in_match_is_named(monkeypatch):
    monkeypatch.delenv("FLEETWATCH_TEST_POD", raising=False)
    with pytest.raises(rc.RecoverError, match=re.escape(
            "slo.recover.match.pod: environment variable FLEETWATCH_TEST_POD is not set")):
        rc.own_match({"pod": "${FLEETWATCH_TEST_POD}"})
    monkeypatch.setenv("FLEETWATCH_TEST_POD", "ranker-0")
    assert rc.own_match({"pod": "${FLEETWATCH_TEST_POD}", "job": "j"}) == \
        {"pod": "ranker-0", "job": "j"}
