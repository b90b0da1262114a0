"""The scaler of the live experiment: every sync period, one policy's queries against the
real Prometheus, Kubernetes' HPA algorithm (``fleetwatch.autoscale.hpa``), and the fleet
resized to its answer.

* `measure`: what KEDA's Prometheus scaler (or the policy's own controller) reads. A
  policy whose ``metric`` query returns a number is read as KEDA would read it; a policy
  whose ``metric`` is a controller's output (WVA's ``wva_desired_replicas``) gets the
  ready replicas' samples — its own per-pod queries, and the current running, waiting,
  KV-cache usage and signal of each pod — and its rule
  (``fleetwatch.autoscale.policies``) computes the value. No series is NaN: the HPA then
  keeps the current count, as KEDA's ``ignoreNullValues: "false"`` makes it.
* `FleetController`: replicas started in the background (a new one joins HAProxy and
  Prometheus only once its sidecar is ready) and removed newest first (out of HAProxy,
  drained, then stopped). Replica-seconds count a replica from the start of its cold
  start to its stop, as a pod's cost would; ``cold_starts`` holds each replica's time
  from its start to its joining HAProxy (seconds).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.autoscale.fleet import MODEL, FleetFiles, HAProxy, Prometheus, Replica

from fleetwatch.autoscale.policies import Policy, ReplicaSample


def _sel(extra: str = "") -> str:
    return "{" + f'model="{MODEL}"' + (f",{extra}" if extra else "") + "}"


#: Per-pod inputs of a controller policy, when the policy does not name its own query.
_WAITING, _RUNNING = _sel('state="waiting"'), _sel('state="running"')
SAMPLE_QUERIES: dict[str, str] = {
    "waiting": f"sum by (pod) (modelserver_requests_active{_WAITING})",
    "running": f"sum by (pod) (modelserver_requests_active{_RUNNING})",
    "kv_usage": f"max by (pod) (modelserver_kv_cache_usage_ratio{_sel()})",
    "signal": f"max by (pod) (fleetwatch_autoscaling_signal_ratio{_sel()})",
    "min_replicas": f"max by (pod) (fleetwatch_autoscaling_min_replicas{_sel()})",
}
#: The controller outputs a ``metric`` query may name instead of a PromQL over the sidecars.
CONTROLLER_METRICS = frozenset({"wva_desired_replicas"})


def controller_metric(query: str) -> str | None:
    """The controller output ``query`` selects (``wva_desired_replicas`` or
    ``wva_desired_replicas{model="m"}``: a policy names it with its model's selector, as
    KEDA's query on the controller's series would), or None for a PromQL over the
    sidecars."""
    name = query.split("{", 1)[0].strip()
    return name if name in CONTROLLER_METRICS else None


def _scalar(result: list[dict[str, Any]]) -> float:
    values = [float(r["value"][1]) for r in result]
    return sum(values) if values else math.nan


def _by_pod(result: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"].get("pod", ""): float(r["value"][1]) for r in result}


def measure(policy: Policy, prometheus: Prometheus, current: int, pods: list[str]) -> float:
    """The value the HPA reads for ``policy`` now (see the module docstring)."""
    queries = dict(policy.queries(MODEL))
    metric_query = queries.pop("metric", None)
    if metric_query is None:
        return math.nan
    if controller_metric(metric_query) is None:
        return _scalar(prometheus.query(metric_query))
    columns = {name: _by_pod(prometheus.query(q)) for name, q in SAMPLE_QUERIES.items()}
    columns.update({name: _by_pod(prometheus.query(q)) for name, q in queries.items()})
    samples = []
    for pod in pods:
        if pod not in columns["running"]:
            continue  # not scraped yet: not a ready replica for the controller

        def get(name: str, default: float = 0.0, pod: str = pod) -> float:
            return columns.get(name, {}).get(pod, default)

        samples.append(ReplicaSample(
            waiting=get("waiting"), running=get("running"), kv_usage=get("kv_usage"),
            signal=get("signal"), utilization=get("utilization", math.nan),
            waiting_peak=get("waiting_peak", get("waiting")),
            kv_usage_peak=get("kv_usage_peak", get("kv_usage")),
            min_replicas=int(get("min_replicas", 1.0))))
    if not samples:
        return math.nan
    return policy.metric(samples, current)


@dataclass
class FleetController:
    """Replicas behind `haproxy`, scraped by `prometheus` (see the module docstring)."""

    files: FleetFiles
    haproxy: HAProxy
    prometheus: Prometheus
    max_replicas: int
    replicas: list[Replica] = field(default_factory=list)
    ready: dict[str, Replica] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    replica_seconds: float = 0.0
    #: Seconds from each replica's start to its joining HAProxy (its sidecar ready).
    cold_starts: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)
    _last_account: float = field(default_factory=time.monotonic)

    def account(self) -> None:
        """Add the replica-seconds since the last call."""
        now = time.monotonic()
        with self.lock:
            self.replica_seconds += len(self.replicas) * (now - self._last_account)
            self._last_account = now

    @property
    def current(self) -> int:
        """Replicas that exist (starting or ready): the Deployment's ``replicas``."""
        return len(self.replicas)

    def ready_names(self) -> list[str]:
        """Pods in rotation."""
        with self.lock:
            return sorted(self.ready)

    def scale_to(self, desired: int) -> None:
        """Start or remove replicas towards ``desired`` (bounded by `max_replicas`)."""
        self.account()
        desired = max(1, min(desired, self.max_replicas))
        while len(self.replicas) < desired:
            used = {r.index for r in self.replicas}
            replica = Replica(min(i for i in range(self.max_replicas) if i not in used),
                              self.files)
            self.replicas.append(replica)
            self._spawn(self._bring_up, replica)
        while len(self.replicas) > desired:
            replica = self.replicas.pop()
            self._spawn(self._take_down, replica)

    def _spawn(self, target: Any, replica: Replica) -> None:
        thread = threading.Thread(target=target, args=(replica,), daemon=True)
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        thread.start()

    def _bring_up(self, replica: Replica) -> None:
        try:
            replica.start()
        except Exception as exc:  # counted: the fleet keeps running with the others
            self.failures.append(f"{replica.name}: {exc}")
            with self.lock:
                if replica in self.replicas:
                    self.replicas.remove(replica)
            return
        with self.lock:
            if replica not in self.replicas:  # removed while starting
                stop = True
            else:
                stop = False
                self.cold_starts.append(time.monotonic() - replica.started_at)
                self.ready[replica.name] = replica
                self.haproxy.add(replica)
                self.prometheus.set_targets({n: r.sidecar_port for n, r in self.ready.items()})
        if stop:
            replica.stop()

    def _take_down(self, replica: Replica) -> None:
        with self.lock:
            was_ready = self.ready.pop(replica.name, None) is not None
            self.prometheus.set_targets({n: r.sidecar_port for n, r in self.ready.items()})
        if was_ready:
            self.haproxy.drain(replica)
            replica.stop()
        # a replica still starting is stopped by _bring_up when it finishes

    def wait_ready(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` replicas are in rotation."""
        deadline = time.monotonic() + timeout_s
        while len(self.ready) < count:
            if time.monotonic() > deadline or self.failures:
                raise RuntimeError(f"{len(self.ready)} of {count} replicas ready "
                                   f"after {timeout_s:.0f} s; failures: {self.failures}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop every replica (and wait for the threads that start or stop them)."""
        self.account()
        for replica in list(self.replicas):
            self._spawn(self._take_down, replica)
        self.replicas.clear()
        for thread in self.threads:
            thread.join(timeout=180)
