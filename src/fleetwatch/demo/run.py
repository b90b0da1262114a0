"""The embedded default: the sidecar in front of a real local Triton and the vLLM emulator.

``fleetwatch demo`` starts, all on loopback:

* a real ``tritonserver`` (nvidia-pytriton wheel) with the demo models — ``ranker``
  (classic, dynamic batching, versions 1 and 2), ``streamer`` (decoupled, exports vLLM-
  backend-format metrics) and ``faulty`` (raises for negative inputs);
* a bounded load generator (HTTP and gRPC) on those models;
* the vLLM-format emulator (a test double of vLLM 0.33's ``/metrics``, not vLLM) serving
  an LLM, ``emulated-llm``;
* the sidecar, scraping both every 2 s and serving the normalized ``/metrics`` on
  ``--port``, with the demo registry (owners, on-call, tiers) on
  ``modelserver_model_info`` and the SLO engine running the demo SLOs
  (``demo/slos.yaml``: ``/slo``, ``/autoscaling``, ``fleetwatch_slo_*``).

Everything stops after ``duration`` seconds or on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from importlib import resources

from fleetwatch.demo.load import run_demo_load
from fleetwatch.demo.triton import TritonServer
from fleetwatch.demo.vllm_emulator import run_in_thread
from fleetwatch.labels.registry import load_registry
from fleetwatch.sidecar.config import SidecarConfig, parse_config
from fleetwatch.sidecar.server import run_sidecar
from fleetwatch.slo.spec import load_slo_file

log = logging.getLogger("fleetwatch.demo")


def demo_config(triton: TritonServer, vllm_metrics_url: str, vllm_health_url: str,
                port: int, interval_s: float = 2.0) -> SidecarConfig:
    """The sidecar configuration of the demo (Triton + emulator targets)."""
    return parse_config({
        "listen": {"address": "127.0.0.1", "port": port},
        "scrape": {"interval_seconds": interval_s, "timeout_seconds": min(interval_s, 2.0)},
        "targets": [
            {"name": "triton", "kind": "triton", "url": triton.metrics_url,
             "api_url": triton.http_url, "models": list(triton.models)},
            {"name": "vllm", "kind": "vllm", "url": vllm_metrics_url,
             "health_url": vllm_health_url},
        ],
    }, "<demo>")


def run_demo(duration: float = 600.0, port: int = 9810) -> None:
    """Run the demo for at most ``duration`` seconds (see module docstring)."""
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    registry = load_registry(resources.files("fleetwatch.demo") / "registry.yaml")
    slos = load_slo_file(resources.files("fleetwatch.demo") / "slos.yaml")
    stop_load = threading.Event()
    with TritonServer() as triton, run_in_thread(port=0) as vllm:
        load = threading.Thread(target=run_demo_load, args=(triton, stop_load),
                                kwargs={"max_duration_s": duration}, daemon=True)
        load.start()
        cfg = demo_config(triton, vllm.metrics_url, vllm.health_url, port)

        def announce(bound: int) -> None:
            base = f"http://127.0.0.1:{bound}"
            print(f"fleetwatch demo: normalized metrics at {base}/metrics, SLOs at {base}/slo, "
                  f"autoscaling at {base}/autoscaling (readiness /readyz); Triton "
                  f"{triton.metrics_url}, vLLM emulator {vllm.metrics_url}; stops in "
                  f"{duration:.0f} s or on Ctrl-C", flush=True)

        async def main() -> None:
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(duration, stop.set)
            await run_sidecar(cfg, registry, stop=stop, on_ready=announce, slos=slos)

        try:
            asyncio.run(main())
        finally:
            stop_load.set()
            load.join(timeout=15)
