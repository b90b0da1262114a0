"""The fleet of the live autoscaling experiment: LLM-shaped Triton replicas, each with its
sidecar, behind HAProxy, scraped by Prometheus.

* `Replica`: one real ``tritonserver`` (nvidia-pytriton's) serving ``llm_sim`` and one
  ``fleetwatch serve`` reading its ``/metrics`` as a vLLM engine (``kind: vllm``: the
  model exposes vLLM's family names) with Triton's model-ready endpoint as its health.
  The sidecar starts with Triton, as a sidecar container starts with its pod, so it
  measures the replica's cold start (``fleetwatch_model_cold_start_seconds``: from the
  model seen not ready to ready) and holds the model's signal through it; the replica's
  cold start here is from its start to the sidecar's ``/readyz``.
* `HAProxy`: Debian's haproxy, one backend with ``balance leastconn`` and one server slot
  per possible replica, all in maintenance at start; a replica is added with the runtime
  API (``set server llm/rN addr … port …``, ``set server llm/rN state ready``) once ready,
  and removed with ``state maint`` and a drain of its connections before it stops
  (https://docs.haproxy.org/2.6/management.html#9.3).
* `Prometheus`: Debian's prometheus scraping every sidecar each second through file-based
  discovery (targets labelled ``pod``), so the policies' queries see replicas come and go.

Every process is started on loopback ports and stopped by its own pid.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwatch.demo.procs import free_ports
from fleetwatch.demo.triton import TritonServer

MODEL = "llm_sim"
MODEL_REPOSITORY = Path(__file__).resolve().parent / "model_repository"
FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
#: Bound on a replica's start (Triton, model load, sidecar ready), seconds.
START_TIMEOUT_S = 120.0
#: Bound on draining a removed replica's connections before it stops, seconds.
DRAIN_TIMEOUT_S = 60.0


def free_port() -> int:
    """A free loopback TCP port."""
    return free_ports(1)[0]


def http_get(url: str, timeout: float = 5.0) -> bytes:
    """The body of ``url``; raises ``OSError`` on failure."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


def wait_for(ready: Callable[[], bool], what: str, timeout: float,
             proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``ready()`` until true (an ``OSError`` counts as not yet); ``TimeoutError``
    naming ``what`` after ``timeout`` seconds, ``RuntimeError`` if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not after {timeout:.0f} s")


def wait_http(url: str, what: str, timeout: float, proc: subprocess.Popen[bytes] | None = None
              ) -> None:
    """Wait until ``url`` answers 2xx (see `wait_for`)."""
    wait_for(lambda: http_get(url, timeout=2.0) is not None, f"{what} ready at {url}",
             timeout, proc)


def start_process(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``cmd`` in the background, output to ``log``."""
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Terminate ``proc`` (by its pid), kill it after ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


@dataclass(frozen=True, slots=True)
class FleetFiles:
    """The experiment's working directory and the sidecars' shared files."""

    workdir: Path
    registry: Path
    slos: Path


def write_fleet_files(workdir: Path, slos: dict[str, Any]) -> FleetFiles:
    """The registry (one entry for `MODEL`) and the SLO file the sidecars read."""
    workdir.mkdir(parents=True, exist_ok=True)
    registry = workdir / "models.yaml"
    registry.write_text(yaml.safe_dump({"models": [{
        "name": MODEL, "team": "genai", "owner": "genai@example.com",
        "oncall": "genai-oncall", "latency_tier": "streaming"}]}))
    path = workdir / "slos.yaml"
    path.write_text(yaml.safe_dump(slos))
    return FleetFiles(workdir, registry, path)


@dataclass
class Replica:
    """One replica: Triton serving `MODEL` and its sidecar (see the module docstring)."""

    index: int
    files: FleetFiles
    server: TritonServer | None = None
    sidecar: subprocess.Popen[bytes] | None = None
    sidecar_port: int = 0
    started_at: float = 0.0
    ready_at: float | None = None

    @property
    def name(self) -> str:
        """``rN``: its HAProxy server and its Prometheus ``pod`` label."""
        return f"r{self.index}"

    def start(self) -> None:
        """Start Triton and the sidecar; return once the sidecar's ``/readyz`` answers.
        On any failure both are stopped before the error propagates."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self.started_at = time.monotonic()
        http, grpc, metrics, self.sidecar_port = free_ports(4)
        server = TritonServer([MODEL], MODEL_REPOSITORY, start_timeout_s=START_TIMEOUT_S,
                              ports=(http, grpc, metrics))
        self.server = server
        config = {"listen": {"address": "127.0.0.1", "port": self.sidecar_port},
                  "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                  "registry": str(self.files.registry),
                  "targets": [{"name": "llm", "kind": "vllm", "url": server.metrics_url,
                               "health_url": f"{server.http_url}/v2/models/{MODEL}/ready",
                               "models": [MODEL]}]}  # not ready while Triton is down
        path = self.files.workdir / f"sidecar-{self.name}.yaml"
        path.write_text(yaml.safe_dump(config))
        self.sidecar = start_process(
            [FLEETWATCH, "serve", "--config", str(path), "--slos", str(self.files.slos),
             "--log-level", "warning"], self.files.workdir / f"sidecar-{self.name}.log")
        # as in a pod whose model server loads for minutes, the sidecar has seen it not
        # ready before it starts (here Triton starts in seconds, a busy machine's sidecar
        # may take as long to import)
        wait_http(f"http://127.0.0.1:{self.sidecar_port}/healthz", f"sidecar {self.name}",
                  START_TIMEOUT_S, self.sidecar)
        wait_for(lambda: 'fleetwatch_upstream_up{target="llm"} 0' in http_get(
            f"http://127.0.0.1:{self.sidecar_port}/metrics").decode(),
            f"sidecar {self.name}'s first scrape", START_TIMEOUT_S, self.sidecar)
        server.start()
        wait_http(f"http://127.0.0.1:{self.sidecar_port}/readyz", f"sidecar {self.name}",
                  START_TIMEOUT_S, self.sidecar)
        self.ready_at = time.monotonic()

    @property
    def address(self) -> tuple[str, int]:
        """Triton's HTTP host and port (what HAProxy forwards to)."""
        assert self.server is not None
        host, port = self.server.http_address.rsplit(":", 1)
        return host, int(port)

    def stop(self) -> None:
        """Stop the sidecar, then Triton."""
        if self.sidecar is not None:
            stop_process(self.sidecar)
        if self.server is not None:
            self.server.stop()


@dataclass
class HAProxy:
    """HAProxy with `slots` server slots in backend ``llm`` (see the module docstring)."""

    workdir: Path
    slots: int
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def socket_path(self) -> Path:
        """The runtime API's unix socket."""
        return self.workdir / "haproxy.sock"

    @property
    def url(self) -> str:
        """The front end's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Write the configuration and start haproxy in the foreground (``-db``)."""
        binary = shutil.which("haproxy")
        if binary is None:
            raise RuntimeError("haproxy not found: apt-get install -y haproxy")
        self.port = free_port()
        servers = "\n".join(f"  server r{i} 127.0.0.1:9 disabled" for i in range(self.slots))
        config = f"""global
  stats socket {self.socket_path} mode 600 level admin
  maxconn 4096
defaults
  mode http
  option http-no-delay
  timeout connect 2s
  timeout client 300s
  timeout server 300s
  timeout queue 300s
frontend llm_front
  bind 127.0.0.1:{self.port}
  default_backend llm
backend llm
  balance leastconn
{servers}
"""
        path = self.workdir / "haproxy.cfg"
        path.write_text(config)
        self.process = start_process([binary, "-db", "-f", str(path)],
                                     self.workdir / "haproxy.log")
        deadline = time.monotonic() + 30
        while not self.socket_path.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.workdir / "haproxy.log").read_text()
                raise RuntimeError(f"haproxy did not start: {log}")
            time.sleep(0.1)

    def command(self, line: str) -> str:
        """One runtime-API command; its answer."""
        with self.lock, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.socket_path))
            s.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def add(self, replica: Replica) -> None:
        """Point ``replica``'s slot at its Triton and put it in rotation."""
        host, port = replica.address
        self.command(f"set server llm/{replica.name} addr {host} port {port}")
        self.command(f"set server llm/{replica.name} state ready")

    def drain(self, replica: Replica) -> None:
        """Take ``replica`` out of rotation and wait until its connections end."""
        self.command(f"set server llm/{replica.name} state maint")
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline and self.current_sessions(replica.name) > 0:
            time.sleep(0.2)

    def current_sessions(self, server: str) -> int:
        """Open sessions of ``server`` (``show stat``'s ``scur``)."""
        lines = self.command("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",")
        for line in lines[1:]:
            row = dict(zip(header, line.split(","), strict=False))
            if row.get("pxname") == "llm" and row.get("svname") == server:
                return int(row.get("scur") or 0)
        return 0

    def stop(self) -> None:
        """Stop haproxy."""
        if self.process is not None:
            stop_process(self.process)


@dataclass
class Prometheus:
    """Prometheus scraping the sidecars listed in ``targets.json`` every second."""

    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The HTTP API's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Write the configuration (no targets yet) and start prometheus."""
        self.set_targets({})
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": "fleetwatch", "file_sd_configs": [
                      {"files": [str(self.workdir / "targets.json")],
                       "refresh_interval": "1s"}]}]}
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.process = start_process(
            ["prometheus", f"--config.file={self.workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.workdir / 'prom-data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], self.workdir / "prometheus.log")
        wait_http(f"{self.url}/-/ready", "prometheus", 60, self.process)

    def set_targets(self, sidecars: dict[str, int]) -> None:
        """Scrape exactly these sidecars (pod name → port); atomic replace of the file."""
        targets = [{"targets": [f"127.0.0.1:{port}"], "labels": {"pod": name}}
                   for name, port in sorted(sidecars.items())]
        tmp = self.workdir / "targets.json.tmp"
        tmp.write_text(json.dumps(targets))
        tmp.replace(self.workdir / "targets.json")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now (``[]`` on no data)."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        body = json.loads(http_get(url))
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus refused {expr!r}: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def stop(self) -> None:
        """Stop prometheus."""
        if self.process is not None:
            stop_process(self.process)
