"""Every dashboard panel returns data from a real Prometheus.

Real processes, all on loopback: Triton (the ``triton_server`` fixture) under the demo load,
a real vLLM (the session ``vllm_server``) under a bounded LLM load, the sidecar with the SLO engine on (the golden SLO file), and the
Debian ``prometheus`` binary scraping the sidecar every second and evaluating the recording
rules of :mod:`fleetwatch.alerts.recording`. Each panel's queries run as Grafana
would run them (range queries for time series, instant ones for tables and stats) with the
template variables set to ``.*``; a panel passes when every query returns at least one
finite value. Panels documented ``Conditional:`` (GPUs: none here; TensorRT-LLM; Triton's
response cache; vLLM's LoRA adapters and speculative decoding) must run without error but
may be empty. The test prints a table of every
panel and its result.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

import pytest

from fleetwatch.alerts import recording
from fleetwatch.dashboards import build_dashboards, dashboard_dict
from fleetwatch.demo.llm_load import run_demo_llm_load
from fleetwatch.demo.load import run_demo_load
from fleetwatch.demo.triton import TritonServer
from fleetwatch.demo.vllm import VLLMServer
from fleetwatch.labels.registry import load_registry
from fleetwatch.sidecar.config import parse_config
from fleetwatch.slo.spec import SLOFile, load_slo_file
from tests.support.dashboard_inspect import query_panels, substitute
from tests.support.helpers import GOLDEN, ROOT, PrometheusProcess, SidecarThread
from tests.support.upstream_crash import kept_up

pytestmark = [pytest.mark.triton, pytest.mark.vllm]

REGISTRY = load_registry(resources.files("fleetwatch.demo") / "registry.yaml")
SLOS = load_slo_file(GOLDEN / "dashboards" / "slos.yaml")
VALUES = {"team": ".*", "model": ".*", "version": ".*", "backend": ".*"}
#: How long the panels may take to all have data: a bound for a broken stack, not a
#: speed target (a busy machine's LLM load fills the TTFT and KV panels late); below the
#: load generators' 240 s so the load still runs while the test waits.
WARMUP_DEADLINE_S = 200.0


# -- recording rules ---------------------------------------------------------------------------


def recording_rules(slos: SLOFile) -> list[tuple[str, str]]:
    """``[(record, expr)]``: the rules generator's per-model and SLO recording rules."""
    rules = [(r.record, r.expr) for r in recording.MODEL_RULES]
    for slo in slos.slos:
        rules += [(r.record, r.expr)
                  for r in recording.slo_rules(slo, recording.burn_windows(slos))]
    return rules


# -- processes ---------------------------------------------------------------------------------


@dataclass
class Stack:
    prometheus: PrometheusProcess
    started: float
    rules: int
    servers: tuple[TritonServer, VLLMServer]

    def servers_down(self) -> str:
        """What a failure must say when a real server died under the test (then its metrics
        port refuses connections for the whole test): its exit code and log tail; "" while
        both run."""
        return "".join(
            f"\n{type(s).__name__} exited (code {s.returncode}) during the test; its log "
            f"ends:\n{s.log_tail()}\n" for s in self.servers if not s.running)


@pytest.fixture(scope="module")
def stack(triton_server, vllm_server) -> Iterator[Stack]:
    stop_load = threading.Event()
    rules = recording_rules(SLOS)
    vllm = vllm_server
    cfg = parse_config({
        "listen": {"address": "127.0.0.1", "port": 0},
        "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
        "targets": [
            {"name": "triton", "kind": "triton", "url": triton_server.metrics_url,
             "api_url": triton_server.http_url, "models": list(triton_server.models)},
            {"name": "vllm", "kind": "vllm", "url": vllm.metrics_url,
             "health_url": vllm.health_url},
        ],
        # the shared-GPU panels: the demo models declared on one (CPU-standing) GPU,
        # the demo teams' quotas
        "placement": [{"gpu_uuid": "GPU-demo-0", "memory_bytes": 8 * 2**30, "models": [
            {"model": "ranker", "model_version": "1"}, {"model": "faulty"},
            {"model": vllm.served_model_name}]}],
        "quotas": str(ROOT / "tests" / "data" / "gpu" / "demo-quotas.yaml")})
    sidecar = SidecarThread(cfg, REGISTRY, SLOS).start()
    load = threading.Thread(target=run_demo_load, args=(triton_server, stop_load),
                            kwargs={"max_duration_s": 240, "pause_s": 0.2}, daemon=True)
    load.start()
    llm_load = threading.Thread(
        target=run_demo_llm_load, args=(vllm.url, vllm.served_model_name, stop_load),
        kwargs={"max_duration_s": 240, "round_s": 2.0, "pause_s": 0.5}, daemon=True)
    llm_load.start()
    prom = None
    try:
        # the panels need data to keep coming, not one Triton process: a crashed Triton is
        # restarted on its ports, as the kubelet would (tests/support/upstream_crash.py)
        with kept_up(triton_server):
            prom = PrometheusProcess([f"127.0.0.1:{sidecar.port}"], rules).__enter__()
            yield Stack(prom, time.time(), len(rules), (triton_server, vllm))
    finally:
        stop_load.set()
        if prom is not None:
            prom.__exit__()
        load.join(30)
        llm_load.join(30)
        sidecar.stop()


# -- running the panels ------------------------------------------------------------------------


@dataclass
class Result:
    dashboard: str
    row: str
    panel: str
    ref: str
    conditional: str | None
    status: str  # "data", "empty", "error: …"
    series: int = 0


def _finite(values) -> bool:
    return any(math.isfinite(float(v[1])) for v in values)


def run_query(prom: PrometheusProcess, target: dict, start: float) -> tuple[str, int]:
    expr = substitute(target["expr"], VALUES)
    now = time.time()
    if target.get("instant"):
        res = prom.api("query", query=expr, time=now)
    else:
        res = prom.api("query_range", query=expr, start=start, end=now, step=1)
    if res.get("status") != "success":
        return f"error: {res.get('error', res)}", 0
    data = res["data"]["result"]
    if target.get("instant"):
        ok = [s for s in data if _finite([s["value"]])]
    else:
        ok = [s for s in data if _finite(s["values"])]
    return ("data" if ok else "empty"), len(ok)


def run_panels(stack: Stack) -> list[Result]:
    out = []
    for dash in DASHBOARDS.values():
        for ref in query_panels(dash):
            for t in ref.panel["targets"]:
                status, count = run_query(stack.prometheus, t, stack.started)
                out.append(Result(dash["title"], ref.row, ref.title, t["refId"],
                                  ref.conditional, status, count))
    return out


def _missing(results: list[Result]) -> list[Result]:
    return [r for r in results if r.status.startswith("error")
            or (r.status != "data" and not r.conditional)]


def table(results: list[Result]) -> str:
    lines = ["| Dashboard | Row | Panel | Query | Result | Series |", "|---|---|---|---|---|---|"]
    for r in results:
        status = r.status if r.status == "data" or not r.conditional else \
            f"{r.status} (conditional: {r.conditional})"
        lines.append(f"| {r.dashboard} | {r.row} | {r.panel} | {r.ref} | {status} | "
                     f"{r.series} |")
    return "\n".join(lines)


DASHBOARDS = {k: dashboard_dict(d) for k, d in build_dashboards(REGISTRY, SLOS).items()}


def test_every_panel_returns_data_from_a_real_prometheus(stack):
    deadline = time.monotonic() + WARMUP_DEADLINE_S
    while True:  # bounded: until every required query has data, or the deadline
        time.sleep(3)
        results = run_panels(stack)
        missing = _missing(results)
        if not missing or time.monotonic() > deadline:
            break
    empty = [r for r in results if r.status != "data"]  # the full table: see `table`
    # captured: pytest shows it with the test's output when the test fails (or with -rP)
    print(f"{stack.rules} recording rules of fleetwatch.alerts.recording; "
          f"{len(results) - len(empty)}/{len(results)} queries with data, "
          f"{time.time() - stack.started:.0f} s after Prometheus started; without:\n"
          f"{table(empty)}")
    assert not missing, "queries without data:\n" + table(missing) + stack.servers_down()
    # the conditional panels are the GPU, TensorRT-LLM and response-cache ones, the
    # capacity panel's prediction (after a burn), and vLLM's LoRA and speculative-decoding
    # panels (this vLLM serves neither: tests/e2e/test_vllm_lora_spec_real.py does)
    reasons = {r.conditional.split(" ")[0] for r in results if r.conditional}
    assert reasons <= {"needs", "TensorRT-LLM", "Triton", "vLLM"}, reasons
