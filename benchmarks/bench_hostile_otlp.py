"""Benchmark of the sidecar under hostile OTLP traffic: ``/healthz`` latency and RSS
before, during and after each attack on the trace receiver's port.

    ./dev bench            (or: python benchmarks/bench_hostile_otlp.py [--src DIR ...])

``fleetwatch serve`` runs as a subprocess on loopback with the default ``traces:`` bounds
(its one target is down and not required: the receiver and the main port are what is
measured), with a traces SLO. Each attack is bounded in count and time and sent to
loopback only:

* ``day_ahead``: bodies of Triton requests dated a day ahead of the clock;
* ``inf_e2e``: vLLM ``llm_request`` spans whose ``gen_ai.latency.e2e`` is +Inf or 1e308;
* ``big_attr``: two bodies with 1 MB attributes (model name and another);
* ``flood``: ``--flood-seconds`` (at most ``--flood-max-bodies``) of bodies of 500
  requests, each of a new model and trace id, from 4 threads;
* ``slowloris``: 300 connections that send half a request's headers and then nothing,
  held for ``--slow-seconds``;
* ``gzip2``: bodies of two gzip members.

Per attack it prints ``/healthz`` p50/p99 (``--probes`` sequential GETs) and the
subprocess's RSS before, during and after it, and the size of ``/metrics`` after it.
``--src`` runs another tree's sidecar (e.g. main's, to compare: alternate the two in one
run and compare ratios; the machine is shared and noisy). The target for ``/healthz`` p99
under attack is below 100 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.support.trace_helpers: the span builders

from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan  # noqa: E402
from tests.support.trace_helpers import T0, body, triton_request, vllm_request  # noqa: E402

DAY_MS = 86_400_000
SLOS = """slos:
  - name: ranker-e2e
    selector: {models: [ranker]}
    sli: {source: traces, latency: {metric: request, threshold_seconds: 0.02}}
    objectives: [{target: 0.9}]
    timeWindow: [{duration: 1h}]
    concurrency: {envelope: 4}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _now_ms() -> int:
    """Milliseconds from the span builders' epoch to now."""
    return int((time.time() - T0) * 1000)


class Sidecar:
    """``fleetwatch serve`` from ``src`` as a subprocess, on two free loopback ports."""

    def __init__(self, src: Path, workdir: Path) -> None:
        self.port, self.otlp = _free_port(), _free_port()
        cfg = workdir / "sidecar.yaml"
        cfg.write_text(
            f"listen: {{address: 127.0.0.1, port: {self.port}}}\n"
            "scrape: {interval_seconds: 1, timeout_seconds: 0.5}\n"
            f"targets: [{{name: t, kind: triton, required: false, "
            f"url: 'http://127.0.0.1:{_free_port()}/metrics'}}]\n"
            f"traces: {{listen: {{address: 127.0.0.1, port: {self.otlp}}}, "
            "vllm_model: llm}\n")
        (workdir / "slos.yaml").write_text(SLOS)
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from fleetwatch.cli import main; main()", "serve",
             "--config", str(cfg), "--slos", str(workdir / "slos.yaml"),
             "--log-level", "error"], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        self.traces = f"http://127.0.0.1:{self.otlp}/v1/traces"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{self.base}/healthz", timeout=2).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the sidecar did not start within 60 s")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def probe(self, n: int) -> tuple[float, float]:
        """``/healthz`` p50 and p99 over ``n`` sequential GETs, milliseconds (a GET that
        fails or takes over 10 s counts as 10 s)."""
        times = []
        for _ in range(n):
            t = time.perf_counter()
            try:
                urllib.request.urlopen(f"{self.base}/healthz", timeout=10).read()
                times.append(time.perf_counter() - t)
            except OSError:
                times.append(10.0)
        times.sort()
        return statistics.median(times) * 1e3, times[max(0, int(n * 0.99) - 1)] * 1e3

    def metrics_size(self) -> int:
        return len(urllib.request.urlopen(f"{self.base}/metrics", timeout=60).read())

    def post(self, data: bytes, encoding: str = "") -> None:
        headers = {"Content-Type": "application/x-protobuf"}
        if encoding:
            headers["Content-Encoding"] = encoding
        req = urllib.request.Request(self.traces, data=data, method="POST", headers=headers)
        with contextlib.suppress(urllib.error.HTTPError):  # a refused body: its answer
            urllib.request.urlopen(req, timeout=30).read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _vllm(e2e: float, trace: int) -> PbSpan:
    span = vllm_request(trace, 0.01, 1.0, 4, start_s=time.time() - T0 - 2)
    for kv in span.attributes:
        if kv.key == "gen_ai.latency.e2e":
            kv.value.double_value = e2e
    return span


def day_ahead(sc: Sidecar, _args: argparse.Namespace) -> None:
    for i in range(100):
        sc.post(body(triton_request(i, start_ms=_now_ms() + DAY_MS)))


def inf_e2e(sc: Sidecar, _args: argparse.Namespace) -> None:
    for i in range(100):
        sc.post(body([_vllm(float("inf") if i % 2 else 1e308, 1_000_000 + i)]))


def big_attr(sc: Sidecar, _args: argparse.Namespace) -> None:
    huge = "m" * (1 << 20)
    spans = triton_request(10_000_001, start_ms=_now_ms())
    spans[1].attributes[0].value.string_value = huge  # triton.model_name
    sc.post(body(spans))
    other = _vllm(1.0, 10_000_002)
    other.attributes.add(key="user.note").value.string_value = huge
    sc.post(body([other]))


def flood_bodies(n: int) -> list[bytes]:
    """``n`` bodies of 500 Triton requests, each of a new model and trace id, dated now
    (built before the attack: building them in the probing process would slow its own
    probes)."""
    now = _now_ms()
    return [body([s for i in range(k * 500, (k + 1) * 500)
                  for s in triton_request(20_000_000 + i, model=f"m{i}", start_ms=now)])
            for k in range(n)]


def flood(sc: Sidecar, args: argparse.Namespace) -> None:
    end = time.time() + args.flood_seconds
    bodies = iter(args.flood_bodies)
    lock = threading.Lock()

    def worker() -> None:
        while time.time() < end:
            with lock:
                data = next(bodies, None)
            if data is None:
                return
            sc.post(data)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def slowloris(sc: Sidecar, args: argparse.Namespace) -> None:
    socks = []
    try:
        for _ in range(300):
            try:
                s = socket.create_connection(("127.0.0.1", sc.otlp), timeout=5)
                s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Ty")
                socks.append(s)
            except OSError:
                pass
        time.sleep(args.slow_seconds)
        print(f"    slowloris: {sum(1 for s in socks if _closed(s))} of {len(socks)} "
              f"connections closed by the server after {args.slow_seconds:g} s")
    finally:
        for s in socks:
            s.close()


def _closed(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def gzip2(sc: Sidecar, _args: argparse.Namespace) -> None:
    for i in range(50):
        now = _now_ms()
        sc.post(gzip.compress(body(triton_request(30_000_000 + 2 * i, start_ms=now))) +
                gzip.compress(body(triton_request(30_000_001 + 2 * i, start_ms=now))),
                "gzip")


ATTACKS: dict[str, Callable[[Sidecar, argparse.Namespace], None]] = {
    "day_ahead": day_ahead, "inf_e2e": inf_e2e, "big_attr": big_attr, "flood": flood,
    "slowloris": slowloris, "gzip2": gzip2}


def run(src: Path, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        sc = Sidecar(src, Path(d))
        try:
            print(f"sidecar from {src}")
            print(f"  {'attack':<10} {'phase':<7} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>8}")
            for name in args.attacks:
                if name == "flood":
                    args.flood_bodies = flood_bodies(args.flood_max_bodies)
                rows = [("before", *sc.probe(args.probes), sc.rss_mb())]
                attack = threading.Thread(target=ATTACKS[name], args=(sc, args))
                attack.start()
                during = sc.probe(args.probes)
                rows.append(("during", *during, sc.rss_mb()))
                attack.join()
                rows.append(("after", *sc.probe(args.probes), sc.rss_mb()))
                for phase, p50, p99, rss in rows:
                    print(f"  {name:<10} {phase:<7} {p50:8.2f} {p99:8.2f} {rss:8.1f}")
                print(f"  {name:<10} /metrics {sc.metrics_size() / 1024:.0f} KiB after")
        finally:
            sc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, action="append",
                    help="a tree's src/ to run the sidecar from (repeat to alternate); "
                         "default this tree's")
    ap.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=list(ATTACKS))
    ap.add_argument("--probes", type=int, default=200)
    ap.add_argument("--flood-seconds", type=float, default=20.0)
    ap.add_argument("--flood-max-bodies", type=int, default=200,
                    help="bodies built before the flood (500 requests each)")
    ap.add_argument("--slow-seconds", type=float, default=15.0)
    args = ap.parse_args()
    for src in args.src or [HERE.parent / "src"]:
        run(src.resolve(), args)


if __name__ == "__main__":
    main()
