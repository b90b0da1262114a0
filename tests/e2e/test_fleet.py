"""A fleet of sidecars on a real Prometheus and a real VictoriaMetrics + vmalert.

Two real Triton servers (nvidia-pytriton's tritonserver, demo models ``ranker`` and
``faulty`` under steady load, a quarter of ``faulty``'s requests failing) and the real
vLLM engine of the test session (``tiny-llm``, short completions), each with its own
sidecar (``fleetwatch serve`` as a subprocess): three sidecars. One Prometheus scrapes the sidecars
through the scrape configuration ``fleetwatch manifests`` generates (its relabelling, over
file-based discovery whose targets carry the labels Kubernetes pod discovery would) and
evaluates the rules ``fleetwatch rules`` generates. Checks:

* the fleet-wide recording rules equal the arithmetic on the per-sidecar series at the
  same evaluation instant: the autoscaling signal is the sum of the sidecars' signals,
  the burn rate is ``(1 − Σ good rate ÷ Σ rate) ÷ (1 − objective)`` over the sidecars;
* VictoriaMetrics scrapes the same sidecars with the same configuration, vmalert
  evaluates the same rule files into it, and the recorded burn rates and signals agree
  with Prometheus' within :data:`BURN_TOLERANCE` / :data:`SIGNAL_TOLERANCE`
  (docs/deploy.md: where they differ and by how much).

The pods are :func:`_pods`. Bounded: 1 s scrape and evaluation intervals, one module-scoped set of
servers, every process stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.llm_load import RequestMix, run_load
from fleetwatch.demo.load import faulty_inputs, ranker_inputs
from fleetwatch.demo.triton import TritonServer

pytestmark = [pytest.mark.triton, pytest.mark.vllm]


@pytest.fixture(scope="module", autouse=True)
def _binaries() -> None:
    """Debian's prometheus and victoria-metrics (with vmalert): ``./dev test`` installs them;
    a missing one is a failure, never a skip."""
    missing = [b for b in ("prometheus", "victoria-metrics", "vmalert") if not shutil.which(b)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: apt-get install prometheus "
                    "victoria-metrics (./dev test installs them)")

ROOT = Path(__file__).resolve().parents[2]
FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
OBJECTIVE = 0.9
BURN_WINDOW = "30s"
#: Prometheus' scrape interval of the sidecars, against rule evaluations every 1 s.
SCRAPE_INTERVAL = "1100ms"
#: Seconds between the end of a scrape's HTTP response and its samples being visible to
#: a rule evaluation (parse and append of a sidecar body of a few kB, on a loaded machine).
COMMIT_SLACK = 0.1
#: Relative agreement of VictoriaMetrics (vmalert) with Prometheus, measured on this
#: fleet (docs/deploy.md): burn rates are ratios of rates over the same window, so the
#: engines' different rate() extrapolation cancels; the summed signal is a gauge both
#: sample at different instants of the sidecars' 1 s updates.
BURN_TOLERANCE = 0.05
SIGNAL_TOLERANCE = 0.25
#: ... or this far apart in replicas, where the signal is small (0.11 against 0.08 for an
#: idle model beside the demo's load: the sampling instants' difference, not a scale).
SIGNAL_ABSOLUTE = 0.05
SLOS = {
    "windows": [{"long": "1m", "short": BURN_WINDOW, "budget_consumed": 0.1}],
    "capacity": {"window": "1m", "min_events": 10, "hysteresis_updates": 1},
    "slos": [{"name": "availability", "selector": {"models": ["ranker", "faulty", "tiny-llm"]},
              "sli": {"availability": {}}, "objectives": [{"target": OBJECTIVE}],
              "timeWindow": [{"duration": "10m"}], "concurrency": {"envelope": 4}}],
}


def _triton_targets(server) -> list[dict]:
    return [{"name": "triton", "kind": "triton", "url": server.metrics_url,
             "api_url": server.http_url, "models": list(server.models)}]


def _triton_load(server) -> None:
    """One round of load: ranker, and faulty with 25 % of its requests failing."""
    send_requests(server.http_address, "ranker", inputs=ranker_inputs, requests=8, concurrency=2)
    send_requests(server.http_address, "faulty", inputs=faulty_inputs(0.25), requests=8,
                  concurrency=2)


@dataclass
class Pod:
    """One inference pod of the fleet: an engine, how its sidecar scrapes it, its load."""

    name: str
    deployment: str
    models: tuple[str, ...]
    make_server: Callable[[], Any]      # a context manager: the started engine
    targets: Callable[[Any], list[dict]]  # engine -> the sidecar configuration's targets
    load: Callable[[Any], None]         # engine -> one round of requests
    server: Any = None
    port: int = 0
    process: subprocess.Popen | None = None


def _vllm_targets(server) -> list[dict]:
    return [{"name": "vllm", "kind": "vllm", "url": server.metrics_url,
             "health_url": server.health_url}]


def _vllm_load(server) -> None:
    """One round of LLM load: 4 short completions, 2 at a time (prompts of 20 words or
    more: see ``RequestMix.prompt_words_min``)."""
    run_load(server.url, server.served_model_name, 2, max_requests=4,
             mix=RequestMix(max_tokens=(4,), prompt_words_median=30, prompt_words_min=20))


#: The Triton pods of the fleet; the third pod is the real vLLM of the test session
#: (:func:`_pods`), whose model ``tiny-llm`` the availability SLO selects too.
TRITON_PODS = [Pod(f"ranker-{i}", "ranker", ("ranker", "faulty"),
                   lambda: TritonServer(["ranker", "faulty"]), _triton_targets, _triton_load)
               for i in range(2)]


def _pods(vllm_server) -> list[Pod]:
    """Two real Triton pods and the session's real vLLM (borrowed: started and stopped by
    its session fixture, not by the fleet)."""
    llm = Pod("llm-0", "llm", ("tiny-llm",), lambda: contextlib.nullcontext(vllm_server),
              _vllm_targets, _vllm_load)
    return [*TRITON_PODS, llm]


def _serving(pods: list[Pod], model: str) -> int:
    """How many pods serve ``model`` (the sidecars a fleet-wide value sums over)."""
    return sum(model in p.models for p in pods)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def _wait(url: str, what: str, timeout: float = 30.0, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            _get(url, timeout=1.0)
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{what} not up at {url} after {timeout}s")


def _sidecar_config(pod: Pod, registry: Path) -> dict:
    return {"listen": {"address": "127.0.0.1", "port": pod.port},
            "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
            "registry": str(registry), "targets": pod.targets(pod.server)}


def _load(pods: list[Pod], stop: threading.Event) -> None:
    """Steady load on every engine until ``stop``."""
    while not stop.is_set():
        for p in pods:
            p.load(p.server)
        stop.wait(0.05)


class Engine:
    """A PromQL HTTP API (Prometheus or VictoriaMetrics) on the loopback."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = json.loads(_get(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def values(self, expr: str, at: float | None = None, by: tuple[str, ...] = ("model",)
               ) -> dict[tuple, float]:
        return {tuple(r["metric"].get(k, "") for k in by): float(r["value"][1])
                for r in self.query(expr, at)}


@dataclass
class Fleet:
    pods: list[Pod]
    prom: Engine
    vm: Engine
    workdir: Path


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, vllm_server) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("fleet")
    PODS = _pods(vllm_server)
    registry = yaml.safe_load((ROOT / "src/fleetwatch/demo/registry.yaml").read_text())
    for e in registry["models"]:
        if e["name"] == "ranker" and "version" not in e:
            e["deployment"] = {"name": "ranker", "namespace": "search"}
    (work / "models.yaml").write_text(yaml.safe_dump(registry))
    (work / "slos.yaml").write_text(yaml.safe_dump(SLOS))
    procs: list[subprocess.Popen] = []
    stop = threading.Event()
    load: threading.Thread | None = None
    servers = []
    try:
        managers = [p.make_server() for p in PODS]
        with ThreadPoolExecutor(len(PODS)) as pool:  # engines start in parallel
            started = list(pool.map(lambda m: m.__enter__(), managers))
        servers.extend(managers)  # exited at the end: a borrowed server's is a no-op
        for pod, server in zip(PODS, started, strict=True):
            pod.server = server
            pod.port = _free_port()
            cfg = work / f"{pod.name}.yaml"
            cfg.write_text(yaml.safe_dump(_sidecar_config(pod, work / "models.yaml")))
            pod.process = _start([FLEETWATCH, "serve", "--config", str(cfg), "--slos",
                                  str(work / "slos.yaml"), "--log-level", "warning"],
                                 work / f"{pod.name}.log")
            procs.append(pod.process)
        for pod in PODS:
            _wait(f"http://127.0.0.1:{pod.port}/healthz", pod.name, proc=pod.process)
        load = threading.Thread(target=_load, args=(PODS, stop), daemon=True)
        load.start()

        # the generated scrape configuration and rules
        subprocess.run([FLEETWATCH, "manifests", "--config", str(work / f"{PODS[0].name}.yaml"),
                        "--registry", str(work / "models.yaml"), "--slos",
                        str(work / "slos.yaml"), "--out", str(work / "manifests")],
                       check=True, capture_output=True, timeout=60)
        subprocess.run([FLEETWATCH, "rules", "--registry", str(work / "models.yaml"),
                        "--slos", str(work / "slos.yaml"), "--format", "plain", "--out",
                        str(work / "rules")], check=True, capture_output=True, timeout=60)
        scrape = yaml.safe_load((work / "manifests/prometheus-scrape.yaml").read_text())
        job = scrape["scrape_configs"][0]
        job.pop("kubernetes_sd_configs")
        job["file_sd_configs"] = [{"files": [str(work / "targets.json")],
                                   "refresh_interval": "1s"}]
        # not a multiple of the 1 s evaluation interval: each sidecar's scrape drifts across
        # the rule evaluations, so a scrape that straddles one evaluation does not straddle
        # every one (the comparison below sets such instants aside)
        job["scrape_interval"] = SCRAPE_INTERVAL
        from fleetwatch.manifests.monitors import file_sd_target

        labels = {"fleetwatch.io/sidecar": "true", "app": "ranker"}
        targets = [file_sd_target(f"127.0.0.1:{p.port}", "search", p.name,
                                  {**labels, "fleetwatch.io/deployment": p.deployment})
                   for p in PODS]
        # the engine's own port in the same pod: the relabelling must drop it
        targets.append(file_sd_target(PODS[0].server.metrics_url.split("/")[2], "search",
                                      PODS[0].name, labels, container="triton",
                                      port_name="metrics"))
        (work / "targets.json").write_text(json.dumps(targets))
        rule_files = sorted(str(p) for p in (work / "rules").glob("*.rules.yml"))
        prom_cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": rule_files, **scrape}
        (work / "prometheus.yml").write_text(yaml.safe_dump(prom_cfg))
        # VictoriaMetrics 1.79 has no file_sd refresh_interval (-promscrape.fileSDCheckInterval)
        vm_scrape = json.loads(json.dumps(scrape))
        vm_scrape["scrape_configs"][0]["file_sd_configs"][0].pop("refresh_interval")
        (work / "vm-scrape.yml").write_text(yaml.safe_dump(
            {"global": {"scrape_interval": "1s"}, **vm_scrape}))

        pport, vport, aport = _free_port(), _free_port(), _free_port()
        procs.append(_start(["prometheus", f"--config.file={work / 'prometheus.yml'}",
                             f"--storage.tsdb.path={work / 'prom-data'}",
                             f"--web.listen-address=127.0.0.1:{pport}"], work / "prom.log"))
        procs.append(_start(["victoria-metrics", f"-storageDataPath={work / 'vm-data'}",
                             f"-httpListenAddr=127.0.0.1:{vport}",
                             f"-promscrape.config={work / 'vm-scrape.yml'}",
                             "-search.latencyOffset=0s", "-search.disableCache"],
                            work / "vm.log"))
        vm_url = f"http://127.0.0.1:{vport}"
        _wait(f"{vm_url}/health", "victoria-metrics", proc=procs[-1])
        procs.append(_start(["vmalert", *[f"-rule={f}" for f in rule_files],
                             f"-datasource.url={vm_url}", f"-remoteWrite.url={vm_url}",
                             "-evaluationInterval=1s", f"-httpListenAddr=127.0.0.1:{aport}",
                             # alerts go nowhere (nothing listens there): rules are compared
                             f"-notifier.url=http://127.0.0.1:{_free_port()}"],
                            work / "vmalert.log"))
        _wait(f"http://127.0.0.1:{pport}/-/ready", "prometheus", proc=procs[-3])
        _wait(f"http://127.0.0.1:{aport}/health", "vmalert", proc=procs[-1])
        yield Fleet(PODS, Engine(f"http://127.0.0.1:{pport}"), Engine(vm_url), work)
    finally:
        stop.set()
        if load is not None:
            load.join(timeout=30)
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        for s in servers:
            s.__exit__(None, None, None)


def _until(fn, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        out = fn()
        if out:
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        time.sleep(1)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


SIGNAL = "model:fleetwatch_autoscaling_signal:sum"
BURN = f"slo_model_band:fleetwatch_slo_burn_rate:ratio_rate{BURN_WINDOW}"


def test_prometheus_scrapes_every_sidecar_with_the_pod_monitor_labels(fleet):
    up = _until(lambda: fleet.prom.query('up{job="fleetwatch"}') if len(
        fleet.prom.query('up{job="fleetwatch"} == 1')) == len(fleet.pods) else None,
        30, "every sidecar up")
    assert sorted(r["metric"]["pod"] for r in up) == sorted(p.name for p in fleet.pods)
    for r in up:
        assert r["metric"]["namespace"] == "search"
        assert r["metric"]["container"] == "fleetwatch"
        assert r["metric"]["endpoint"] == "fleetwatch"
    # the engine's own port was discovered too, and dropped by the relabelling
    assert fleet.prom.query("count(nv_inference_request_success)") == []


def _eval_time(engine: Engine, expr: str) -> float | None:
    rows = engine.query(f"timestamp({expr})")
    return max(float(r["value"][1]) for r in rows) if rows else None


def _scrapes_in_flight(fleet: Fleet, at: float) -> list[str]:
    """The pods whose last scrape at or before the evaluation instant ``at`` (seconds) may
    have been stored after the rule read the database: the scrape started before ``at``
    (its samples carry its start time) and its response ended less than
    ``COMMIT_SLACK`` before ``at``. A later query at ``at`` sees those samples; the rule
    may not have."""
    started = fleet.prom.values("timestamp(scrape_duration_seconds)", at, ("pod",))
    took = fleet.prom.values("scrape_duration_seconds", at, ("pod",))
    return sorted(pod for (pod,), ts in started.items()
                  if at - ts < took[(pod,)] + COMMIT_SLACK)


def _matches_at(fleet: Fleet, at: float, at_burn: float) -> tuple[int, int, list[str]]:
    """At one evaluation instant of each rule group (``at``: the signal's, ``at_burn``:
    the burn rate's; the groups have their own evaluation offsets): how many fleet-wide
    values equal the per-sidecar arithmetic (signal sums and burn-rate ratios), of how
    many, and the mismatches."""
    p = fleet.prom
    ok, total, bad = 0, 0, []
    recorded = p.values(SIGNAL, at, ("model", "model_version"))
    per_pod = p.values("fleetwatch_autoscaling_signal_ratio", at,
                       ("model", "model_version", "pod"))
    for key, value in recorded.items():
        parts = [v for k, v in per_pod.items() if k[:2] == key]
        total += 1
        if len(parts) == _serving(fleet.pods, key[0]) and math.isclose(
                value, sum(parts), rel_tol=1e-9, abs_tol=1e-12):
            ok += 1
        else:
            bad.append(f"signal {key}: {value} vs {parts}")
    burn = p.values(f'{BURN}{{band="all"}}', at_burn, ("model", "model_version"))
    sel = f'{{slo="availability", band="all"}}[{BURN_WINDOW}]'
    good = p.values(f"rate(fleetwatch_slo_good_events_total{sel})", at_burn,
                    ("model", "model_version", "pod"))
    every = p.values(f"rate(fleetwatch_slo_events_total{sel})", at_burn,
                     ("model", "model_version", "pod"))
    for key, value in burn.items():
        g = [v for k, v in good.items() if k[:2] == key]
        a = [v for k, v in every.items() if k[:2] == key]
        total += 1
        want = (1 - sum(g) / sum(a)) / (1 - OBJECTIVE) if sum(a) else float("nan")
        if len(a) == _serving(fleet.pods, key[0]) and math.isclose(
                value, want, rel_tol=1e-9, abs_tol=1e-12):
            ok += 1
        else:
            bad.append(f"burn {key}: {value} vs {want} from {g} / {a}")
    return ok, total, bad


def test_fleet_wide_rules_equal_the_per_sidecar_arithmetic(fleet):
    # both sidecars' ranker and faulty in the burn rate and the signal, faulty burning
    def ready():
        burn = fleet.prom.values(f'{BURN}{{band="all"}}', by=("model",))
        sig = fleet.prom.values(SIGNAL, by=("model",))
        pods = [fleet.prom.values(f"count by (model) (count by (model, pod) ({m}))")
                for m in ("fleetwatch_autoscaling_signal_ratio",
                          f"rate(fleetwatch_slo_events_total[{BURN_WINDOW}])")]
        seen[:] = [burn, sig, pods]
        every_pod = all(n.get((m,)) == _serving(fleet.pods, m) for n in pods
                        for m in ("ranker", "faulty"))
        return (burn.get(("faulty",), 0) > 0 and sig.get(("ranker",), 0) > 0
                and every_pod) or None
    seen: list = []
    _until(ready, 60, lambda: f"burn rates and signals from both sidecars (last: {seen})")
    time.sleep(2)  # the rules have evaluated over what the query saw
    clean, racy = [], []
    for _ in range(30):  # evaluation instants one second apart, until six clean ones
        at = _eval_time(fleet.prom, SIGNAL)
        at_burn = _eval_time(fleet.prom, f'{BURN}{{band="all"}}')
        assert at is not None and at_burn is not None
        if (clean + racy) and at == (clean + racy)[-1][0]:
            time.sleep(0.5)  # the next evaluation is late: no instant twice
            continue
        in_flight = sorted({*_scrapes_in_flight(fleet, at), *_scrapes_in_flight(fleet, at_burn)})
        (racy if in_flight else clean).append(
            (at, in_flight, *_matches_at(fleet, at, at_burn)))
        if len(clean) >= 6:
            break
        time.sleep(1.0)
    print(f"fleet: {len(clean)} clean evaluation instants, {len(racy)} with a scrape in "
          f"flight: {[(r[1], r[2] == r[3]) for r in racy]}")
    # the scrapes drift across the evaluations (1.1 s against 1 s), so most instants are
    # clean; at every clean one each fleet-wide value equals the per-sidecar arithmetic
    assert len(clean) >= 6, (clean, racy)
    assert all(total >= 3 for *_, total, _ in clean), clean  # signals and burn rates
    assert all(ok == total for *_, ok, total, _ in clean), clean
    # the burn rate is the failing share over the error budget: 25 % of faulty fails
    burn = fleet.prom.values(f'{BURN}{{band="all"}}', by=("model",))
    assert burn[("faulty",)] == pytest.approx(0.25 / (1 - OBJECTIVE), rel=0.35)
    assert burn[("ranker",)] == pytest.approx(0.0, abs=1e-9)


def test_victoriametrics_and_vmalert_agree_with_prometheus(fleet):
    window = "20s"

    def both(expr, at=None):
        return fleet.prom.values(expr, at), fleet.vm.values(expr, at)

    def ready():
        p, v = both(f'avg_over_time({BURN}{{band="all"}}[{window}])')
        return (p.get(("faulty",), 0) > 0 and v.get(("faulty",), 0) > 0) or None
    _until(ready, 60, "vmalert's recorded burn rate in VictoriaMetrics")
    time.sleep(5)
    # every query at one evaluation time, a little in the past: queried one after the
    # other, the two engines would otherwise average windows that end seconds apart (a
    # starved machine's queries take that long) over series that move
    at = time.time() - 2
    p_burn, v_burn = both(f'avg_over_time({BURN}{{band="all", model="faulty"}}[{window}])', at)
    p_sig, v_sig = both(f'avg_over_time({SIGNAL}{{model="ranker"}}[{window}])', at)
    p_rate, v_rate = both('sum by (model) (model:modelserver_requests:rate5m{model="ranker"})',
                          at)
    report = {"burn_faulty": (p_burn, v_burn), "signal_ranker": (p_sig, v_sig),
              "requests_rate5m_ranker": (p_rate, v_rate)}
    (fleet.workdir / "engines.json").write_text(json.dumps(
        {k: [list(a.values()), list(b.values())] for k, (a, b) in report.items()}))
    print("prometheus vs victoriametrics:", report)
    assert _rel(p_burn[("faulty",)], v_burn[("faulty",)]) <= BURN_TOLERANCE, report
    assert (_rel(p_sig[("ranker",)], v_sig[("ranker",)]) <= SIGNAL_TOLERANCE
            or abs(p_sig[("ranker",)] - v_sig[("ranker",)]) <= SIGNAL_ABSOLUTE), report
    # rate() over a window longer than the series' life: Prometheus extrapolates the
    # increase over the window only as far as the samples reach (≈ increase ÷ 5 min),
    # VictoriaMetrics divides by the time the samples cover: VM's is the larger
    assert v_rate[("ranker",)] > p_rate[("ranker",)] > 0, report
