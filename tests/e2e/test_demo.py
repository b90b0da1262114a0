"""The README's main job: ``fleetwatch demo`` (real Triton + real vLLM + sidecar with the
SLO engine) serves classic models and the LLM side by side, then stops on Ctrl-C.

It starts its own vLLM (the demo's path, not the session fixture): one of the suite's five
vLLM starts."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest

from fleetwatch.demo.run import (
    DEMO_DEVICE,
    DEMO_LLM,
    LLM_DELAY_MAX_S,
    SLO_POLL_SECONDS,
    HostLoad,
    demo_config,
    llm_delay,
    summary_lines,
)
from fleetwatch.demo.supervise import Exit
from fleetwatch.demo.triton import DEMO_MODELS
from fleetwatch.exporters.parser import parse_exposition
from tests.support.helpers import require_vllm
from tests.support.promtool_check import check_metrics


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.triton
@pytest.mark.vllm
def test_demo_serves_classic_models_and_the_llm_then_stops():
    require_vllm()
    # Stopped with Ctrl-C (SIGINT) once its documents are checked, as a user stops it;
    # the summary must still give each SLO's state (the demo keeps the last /slo). The
    # duration only has to outlast the checks, which wait for the LLM's load: it joins
    # after a fifth of the duration (llm_delay), so a longer demo only waits longer for it
    # (900 s: 90 s); 200 s leaves four times that delay after the LLM joins.
    duration = 200
    proc = subprocess.Popen([sys.executable, "-m", "fleetwatch.cli", "demo", "--duration",
                             str(duration), "--port", "0", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = None
        # The demo's own start bounds (vLLM's and Triton's) decide a slow start's failure,
        # and the demo then exits (caught below); this only stops a hung demo.
        deadline = time.monotonic() + 1200
        assert proc.stdout is not None
        while base is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                pytest.fail(f"demo exited early with {proc.returncode}")
            m = re.search(r"(http://127\.0\.0\.1:\d+)/metrics", line)
            if m:
                base = m.group(1)
        assert base, "the demo never announced its URL"
        models, slo_states = set(), []
        while time.monotonic() < deadline:
            _status, body = _get(f"{base}/metrics")
            samples, meta = parse_exposition(body)
            assert not meta.invalid
            models = {(dict(lab).get("model"), dict(lab).get("backend")) for name, lab, _
                      in samples if name == "modelserver_requests_total"}
            slo_states = json.loads(_get(f"{base}/slo")[1])["slos"]
            llm_events = sum(sum(s["events"].values()) for s in slo_states
                             if s["slo"] == "llm-ttft")
            # the LLM's load joins a fifth of the way in (fleetwatch.demo.run.llm_delay)
            if {("ranker", "triton"), ("faulty", "triton"), ("streamer", "triton"),
                    ("tiny-llm", "vllm")} <= models and len(slo_states) >= 5 and llm_events:
                break
            time.sleep(2)
        assert ("tiny-llm", "vllm") in models and ("ranker", "triton") in models
        # Prometheus' own parser: no parse error, no duplicate family or series, lint
        # findings on fleetwatch's families only where docs/metrics.md lists them
        assert check_metrics(body) == []
        info = [dict(lab) for name, lab, _ in samples if name == "modelserver_model_info"]
        assert {i["model"]: i["team"] for i in info}["faulty"] == "platform"
        assert {s["slo"] for s in slo_states} >= {"llm-ttft", "availability"}
        llm = next(s for s in slo_states if s["slo"] == "llm-ttft")
        assert llm["model"] == "tiny-llm" and sum(llm["events"].values()) > 0
        assert _get(f"{base}/readyz")[0] == 200
        assert json.loads(_get(f"{base}/autoscaling")[1])["models"]
        time.sleep(SLO_POLL_SECONDS + 1)  # the demo polled /slo with those states
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, rest
        # the closing summary: every SLO's final state, and both servers to the end — a
        # server the supervisor restarted is named with its exits (pytriton's Python
        # backend can abort: exit -6, restarted, exit 0)
        assert "fleetwatch demo: done. Final SLO states (/slo):" in rest, rest
        assert re.search(r"llm-ttft on tiny-llm: \w+, burn [\d.e+-]+ over \w+(, [\d.e+-]+ over "
                         r"\w+)+, capacity", rest), rest
        restarted = r"(?: \(restarted \d+×: exit -?\d+ at \d+ s(?:; exit -?\d+ at \d+ s)*\))?"
        servers = re.search(rf"servers: Triton ran to the end({restarted}), vLLM ran to the "
                            rf"end({restarted})\n", rest)
        assert servers, rest
        if servers.group(1) or servers.group(2):
            print(f"the demo restarted a server: {servers.group(0).strip()}")
            assert "restarting it (1 of 3)" in rest and " is back (restart 1)" in rest, rest
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def test_demo_port_in_use_is_one_line():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "fleetwatch.cli", "demo", "--port",
                              str(port)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"fleetwatch: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(demo --port)"]


def test_the_summary_names_each_slo_state_and_a_server_that_died():
    slo = {"slos": [{"slo": "availability", "model": "ranker", "model_version": "2",
                     "state": "ok",
                     "burn_rates": {"1h": {"all": 0.5}, "5m": {"all": 2.0}},
                     "capacity": 8.0},
                    {"slo": "llm-ttft", "model": "tiny-llm", "state": "no_data",
                     "burn_rates": {}, "capacity": None}]}
    lines = summary_lines(slo, {"Triton": SimpleNamespace(running=False),
                                "vLLM": SimpleNamespace(running=True)})
    assert lines[1] == ("  availability on ranker version 2: ok, burn 2 over 5m, 0.5 over 1h, "
                        "capacity 8")
    assert lines[2] == "  llm-ttft on tiny-llm: no_data, no burn rate yet, capacity –"
    assert lines[-1] == "  servers: vLLM ran to the end, Triton DIED during the demo"
    assert summary_lines({}, {})[1] == "  (none: the sidecar did not answer /slo)"
    restarted = [Exit("Triton", 31.4, -6, "abort", True)]
    assert summary_lines(slo, {"Triton": SimpleNamespace(running=True)}, restarted)[-1] == (
        "  servers: Triton ran to the end (restarted 1×: exit -6 at 31 s)")


def test_the_summary_names_the_neighbour_an_interference_blames():
    slo = {"slos": [{"slo": "ranker-p99", "model": "ranker", "model_version": "1",
                     "state": "interference", "burn_rates": {"30s": {"all": 100.0}},
                     "capacity": 8.0,
                     "attribution": {"kind": "interference", "neighbours": [
                         {"model": "tiny-llm", "concurrency_before": 0.0,
                          "concurrency_during": 0.95, "correlation": 0.46}]}}]}
    assert summary_lines(slo, {})[1] == ("  ranker-p99 on ranker version 1: interference "
                                         "(neighbour tiny-llm), burn 100 over 30s, capacity 8")


def test_the_summary_explains_a_state_that_is_not_ok():
    """A regression's burn over all bands may be below every threshold while one band
    burns: the engine's explanation, which names it, follows the line."""
    why = "budget burning in band 2, inside the envelope (≤ 8): page the owner"
    slo = {"slos": [{"slo": "llm-ttft", "model": "tiny-llm", "state": "regression",
                     "burn_rates": {"2m": {"all": 0.405}}, "capacity": 8.0,
                     "explanation": why},
                    {"slo": "availability", "model": "ranker", "state": "ok",
                     "burn_rates": {}, "capacity": 8.0, "explanation": "within budget"}]}
    lines = summary_lines(slo, {})
    assert lines[1:4] == ["  llm-ttft on tiny-llm: regression, burn 0.405 over 2m, capacity 8",
                          f"    why: {why}",
                          "  availability on ranker: ok, no burn rate yet, capacity 8"]
    assert not any("note:" in line for line in lines)  # the host's load is not known


def test_a_regression_is_followed_by_the_hosts_load():
    """Every demo model shares the host's CPUs: with a regression the summary gives the
    load average, since work outside the demo reads as a regression too."""
    slo = {"slos": [{"slo": "availability", "model": "faulty", "sli": "availability",
                     "state": "regression", "burn_rates": {}, "capacity": 8.0}]}
    host = HostLoad(avg_1m=5.25, avg_15m=3.0, cpus=2)
    # faulty fails by design: a slow host does not fail requests
    assert not any("note:" in line for line in summary_lines(slo, {}, (), host))
    slo = {"slos": [{"slo": "ranker-p99", "model": "ranker", "sli": "latency",
                     "state": "regression", "burn_rates": {}, "capacity": 8.0}]}
    assert summary_lines(slo, {}, (), host)[2] == (
        "  note: every demo model shares this host's 2 CPUs (load average 5.2 now, 3.0 over "
        "15 min); work outside the demo slows them too, is no neighbour the engine can see, "
        "and reads as a regression")
    slo["slos"][0]["state"] = "interference"
    assert not any("note:" in line for line in summary_lines(slo, {}, (), host))
    now = HostLoad.now()
    assert now is not None and now.cpus >= 1 and now.avg_15m >= 0


def test_every_demo_model_shares_one_device_and_the_llm_joins_later():
    triton = SimpleNamespace(metrics_url="http://127.0.0.1:1/metrics",
                             http_url="http://127.0.0.1:2", models=DEMO_MODELS)
    cfg = demo_config(triton, "http://127.0.0.1:3/metrics", "http://127.0.0.1:3/health", 0)
    placement = cfg.declared_placement()
    assert placement.gpus_of("ranker") == placement.gpus_of(DEMO_LLM) == {DEMO_DEVICE}
    assert {m.model for m in placement.models_on(DEMO_DEVICE)} == {*DEMO_MODELS, DEMO_LLM}
    assert llm_delay(600) == LLM_DELAY_MAX_S  # the default demo: 90 s alone first
    assert llm_delay(30) == 6  # the demo test's 30 s: a fifth
