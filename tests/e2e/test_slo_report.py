"""``fleetwatch slo report`` against a real Prometheus scraping a sidecar with the SLO
engine on, fed by a real vLLM (the session ``vllm_server``) under a bounded LLM load."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest

from fleetwatch.demo.llm_load import run_demo_llm_load
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.server import run_sidecar
from fleetwatch.slo.spec import parse_slo_file
from tests.support.helpers import PrometheusProcess

SLOS = {
    "windows": [{"long": "20s", "short": "5s", "budget_consumed": 0.05}],
    "capacity": {"window": "20s", "min_events": 10, "hysteresis_updates": 1},
    "slos": [
        {"name": "llm-ttft", "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.25}},
         "objectives": [{"target": 0.95}], "timeWindow": [{"duration": "10m"}],
         "concurrency": {"envelope": 8, "bands": [1, 2, 4, 8, 16, 32, 64]}},
        {"name": "llm-availability", "sli": {"availability": {}},
         "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "10m"}],
         "concurrency": {"envelope": 8}},
    ],
}


@pytest.mark.vllm
def test_report_reads_the_engine_back_from_prometheus(vllm_server):
    stop = asyncio.Event()
    ports: list[int] = []
    loop_box: list[asyncio.AbstractEventLoop] = []
    vllm = vllm_server
    stop_load = threading.Event()
    load = threading.Thread(target=run_demo_llm_load,
                            args=(vllm.url, vllm.served_model_name, stop_load),
                            kwargs={"max_duration_s": 120, "round_s": 2.0, "pause_s": 0.2},
                            daemon=True)
    load.start()
    try:
        cfg = parse_config({"listen": {"address": "127.0.0.1", "port": 0},
                            "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                            "targets": [{"name": "vllm", "kind": "vllm",
                                         "url": vllm.metrics_url}]})

        def serve():
            async def main():
                loop_box.append(asyncio.get_running_loop())
                await run_sidecar(cfg, stop=stop, on_ready=ports.append,
                                  slos=parse_slo_file(SLOS))
            asyncio.run(main())

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not ports and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ports, "sidecar did not start"
        try:
            with PrometheusProcess([f"127.0.0.1:{ports[0]}"]) as prom:
                # bounded: until the report has the SLO (60 s: a busy 2-core machine took
                # more than 30 s for the 20-s window's first burn rate)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not prom.query(
                        'fleetwatch_slo_burn_rate{band="all",window="20s"} >= 0'):
                    time.sleep(1)
                cli = [sys.executable, "-m", "fleetwatch.cli", "slo", "report",
                       "--prometheus", prom.url]
                # both forms until both have the SLOs: on a starved machine a scrape that
                # timed out (the sidecar's of vLLM, Prometheus's of the sidecar) leaves a
                # moment without series between the two reports
                while True:
                    res = subprocess.run([*cli, "--json"], capture_output=True, text=True,
                                         timeout=30)
                    assert res.returncode == 0, res.stderr
                    report = json.loads(res.stdout)
                    table = subprocess.run(cli, capture_output=True, text=True, timeout=30,
                                           env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"})
                    assert table.returncode == 0, table.stderr
                    if (report and "llm-ttft" in table.stdout) or time.monotonic() > deadline:
                        break
                    time.sleep(1)
        finally:
            loop_box[0].call_soon_threadsafe(stop.set)
            thread.join(timeout=10)
    finally:
        stop_load.set()
        load.join(timeout=30)

    rows = {r["slo"]: r for r in report}
    assert set(rows) == {"llm-ttft", "llm-availability"}
    ttft = rows["llm-ttft"]
    assert ttft["model"] == "tiny-llm" and ttft["backend"] == "vllm"
    assert ttft["state"] in ("ok", "regression", "overload")
    assert ttft["capacity"] > 0
    assert 0 <= ttft["burn_rates"]["20s"]["all"] < 1000
    assert ttft["concurrency"] is not None
    assert "llm-ttft" in table.stdout and "tiny-llm" in table.stdout
