"""The README's main job: ``fleetwatch demo`` (real Triton + real vLLM + sidecar with the
SLO engine) serves classic models and the LLM side by side, then stops by itself.

It starts its own vLLM (the demo's path, not the session fixture): one of the suite's three
vLLM starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest
from tests.helpers import require_vllm
from tests.promtool_check import check_metrics

from fleetwatch.demo.run import summary_lines
from fleetwatch.exporters.parser import parse_exposition


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
    proc = subprocess.Popen([sys.executable, "-m", "fleetwatch.cli", "demo", "--duration", "30",
                             "--port", "0", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = None
        deadline = time.monotonic() + 150
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
            if {("ranker", "triton"), ("faulty", "triton"), ("streamer", "triton"),
                    ("tiny-llm", "vllm")} <= models and len(slo_states) >= 5:
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
        rest, _ = proc.communicate(timeout=60)  # stops by itself after --duration
        assert proc.returncode == 0, rest
        # the closing summary: every SLO's final state, and both servers to the end
        assert "fleetwatch demo: done. Final SLO states (/slo):" in rest, rest
        assert re.search(r"llm-ttft on tiny-llm: \w+, burn [\d.e+-]+ over \w+", rest), rest
        assert "servers: Triton ran to the end, vLLM ran to the end" in rest, rest
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
    slo = {"slos": [{"slo": "availability", "model": "ranker", "state": "ok",
                     "burn_rates": {"1h": {"all": 0.5}, "5m": {"all": 2.0}},
                     "capacity": 8.0},
                    {"slo": "llm-ttft", "model": "tiny-llm", "state": "no_data",
                     "burn_rates": {}, "capacity": None}]}
    lines = summary_lines(slo, {"Triton": SimpleNamespace(running=False),
                                "vLLM": SimpleNamespace(running=True)})
    assert lines[1] == "  availability on ranker: ok, burn 2 over 5m, capacity 8"
    assert lines[2] == "  llm-ttft on tiny-llm: no_data, no burn rate yet, capacity –"
    assert lines[-1] == "  servers: vLLM ran to the end, Triton DIED during the demo"
    assert summary_lines({}, {})[1] == "  (none: the sidecar did not answer /slo)"
