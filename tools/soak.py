"""Soak test of the sidecar: churn, bad values and concurrent scrapers for minutes.

    python tools/soak.py [--duration 300] [--scrapers 4] [--json out.json]

Runs ``fleetwatch serve`` (a subprocess, loopback only) with an SLO file selecting every
model, against an in-process upstream double that writes a Triton-format exposition of
``--models`` models of which ``--churn`` get new names every scrape, with bad values
mixed in (a NaN counter every 7th scrape, a counter gone negative every 11th, a
histogram with decreasing buckets every 13th, a value Prometheus cannot read in a
passed-through family every 5th). ``--scrapers`` threads read ``/metrics`` (gzip) and one
reads ``/healthz``, each pausing ``--pause`` seconds between requests.

Every ``--report`` seconds it prints one line: elapsed seconds, the sidecar's RSS (MB)
and open file descriptors, ``/metrics`` and ``/healthz`` latency p50/p99 (ms) over the
period, requests answered and refused (an error or a non-200 answer) so far. At the end
a summary, and with ``--json`` every row and the totals for a test to assert on (the CI
version, tests/e2e/test_soak.py, asserts on counts: RSS growth over the last third, file
descriptors, no request refused — not on latencies).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
_MAIN = "import sys; from fleetwatch.cli import main; sys.exit(main())"
#: Seconds ``fleetwatch serve`` may take to listen: a bound for a hung start, generous
#: for a start under tracemalloc (benchmarks/memtrace.py) on a shared machine.
START_SECONDS = 120


def exposition(n: int, models: int, churn: int) -> str:
    """The n-th scrape of the upstream double (see module docstring)."""
    out = ["# TYPE nv_inference_request_success counter\n"]
    names = [f"stable{i}" for i in range(models - churn)] + \
        [f"churn{n}_{i}" for i in range(churn)]
    for i, m in enumerate(names):
        v = "NaN" if n % 7 == 3 and i == 0 else repr(float(1000 * n + i))
        out.append(f'nv_inference_request_success{{model="{m}",version="1"}} {v}\n')
    out.append("# TYPE nv_inference_request_failure counter\n")
    for i, m in enumerate(names):
        v = "-3" if n % 11 == 5 and i == 1 else str(n // 10)
        out.append(f'nv_inference_request_failure{{model="{m}",version="1",reason="BACKEND"}}'
                   f" {v}\n")
    out.append("# TYPE nv_inference_request_duration_us counter\n")
    out += [f'nv_inference_request_duration_us{{model="{m}",version="1"}} {n * 5000}\n'
            for m in names]
    out.append("# TYPE soak_latency_seconds histogram\n")
    for i, m in enumerate(names[:20]):
        broken = n % 13 == 7 and i == 0
        for le, v in (("0.1", n), ("1", 1 if broken else 2 * n), ("+Inf", 3 * n)):
            out.append(f'soak_latency_seconds_bucket{{model="{m}",le="{le}"}} {v}\n')
        out.append(f'soak_latency_seconds_count{{model="{m}"}} {3 * n}\n')
    out.append("# TYPE soak_passthrough gauge\n")
    out.append(f"soak_passthrough {'line' if n % 5 == 0 else n}\n")
    return "".join(out)


class Upstream:
    """The upstream double: ``/metrics`` is :func:`exposition` of its request count."""

    def __init__(self, models: int, churn: int) -> None:
        self.n = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exposition(outer.n, models, churn).encode()
                outer.n += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Probe:
    """Latencies (seconds) of one path in the current period, and totals."""

    latencies: list[float] = field(default_factory=list)
    ok: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> list[float]:
        with self.lock:
            out, self.latencies = self.latencies, []
        return out


def _client(url: str, probe: Probe, stop: threading.Event, pause: float,
            gzip: bool) -> None:
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            req = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
                good = r.status == 200
        except OSError as exc:
            good = False
            with probe.lock:
                probe.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        with probe.lock:
            probe.latencies.append(time.perf_counter() - t0)
            if good:
                probe.ok += 1
            else:
                probe.refused += 1
        stop.wait(pause)


def _pct(values: list[float], q: float) -> float:
    """The q-quantile (0–1) of values in milliseconds (0 without values)."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0] * 1000
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] * 1000


def _proc_stats(pid: int) -> tuple[float, int]:
    """RSS (MB) and open file descriptors of a process (Linux /proc)."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def _start_sidecar(folder: Path, upstream_url: str, args: argparse.Namespace
                   ) -> tuple[subprocess.Popen[bytes], int, Path]:
    (folder / "sidecar.yaml").write_text(yaml.safe_dump({
        "listen": {"address": "127.0.0.1", "port": 0},
        "scrape": {"interval_seconds": args.interval, "timeout_seconds": args.interval},
        "passthrough_unmapped": True,
        "targets": [{"name": "soak", "kind": "triton", "url": upstream_url}]}))
    (folder / "slos.yaml").write_text(yaml.safe_dump({
        "windows": [{"long": "1m", "short": "10s", "budget_consumed": 0.05}],
        "capacity": {"window": "1m"},
        "limits": {"max_models_per_slo": args.max_models,
                   "forget_model_after": f"{args.forget}s"},
        "slos": [{"name": "availability", "sli": {"availability": {}},
                  "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
                  "concurrency": {"envelope": 8}}]}))
    log = folder / "serve.log"
    with log.open("wb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "serve", "--config", str(folder / "sidecar.yaml"),
             "--slos", str(folder / "slos.yaml")],
            stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text(errors="replace").splitlines():
            if "serving on http://" in line:
                return proc, int(line.rsplit(":", 1)[1].split("/")[0]), log
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"fleetwatch serve did not start:\n{log.read_text()[-2000:]}")


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak (see module docstring); returns the rows and totals."""
    folder = Path(tempfile.mkdtemp(prefix="fw-soak-"))
    up = Upstream(args.models, args.churn)
    proc, port, log = _start_sidecar(folder, up.url, args)
    base = f"http://127.0.0.1:{port}"
    metrics, health = Probe(), Probe()
    stop = threading.Event()
    threads = [threading.Thread(target=_client, args=(base + "/metrics", metrics, stop,
                                                      args.pause, True), daemon=True)
               for _ in range(args.scrapers)]
    threads.append(threading.Thread(target=_client, args=(base + "/healthz", health, stop,
                                                          0.1, False), daemon=True))
    rows: list[dict[str, float]] = []
    t0 = time.monotonic()
    print(f"soak: {args.duration:g} s, {args.models} models ({args.churn} renamed per "
          f"scrape), {args.scrapers} /metrics scrapers; sidecar pid {proc.pid}, log {log}")
    print(f"{'t_s':>6} {'rss_mb':>7} {'fds':>4} {'metrics_p50':>11} {'metrics_p99':>11} "
          f"{'healthz_p50':>11} {'healthz_p99':>11} {'ok':>6} {'refused':>7}")
    try:
        for t in threads:
            t.start()
        while (elapsed := time.monotonic() - t0) < args.duration:
            time.sleep(min(args.report, args.duration - elapsed))
            if proc.poll() is not None:
                raise SystemExit(f"the sidecar exited ({proc.returncode}):\n"
                                 f"{log.read_text()[-2000:]}")
            rss, fds = _proc_stats(proc.pid)
            ml, hl = metrics.take(), health.take()
            row = {"t": round(time.monotonic() - t0, 1), "rss_mb": round(rss, 1), "fds": fds,
                   "metrics_p50_ms": _pct(ml, 0.5), "metrics_p99_ms": _pct(ml, 0.99),
                   "healthz_p50_ms": _pct(hl, 0.5), "healthz_p99_ms": _pct(hl, 0.99),
                   "ok": metrics.ok + health.ok, "refused": metrics.refused + health.refused}
            rows.append(row)
            print(f"{row['t']:>6.0f} {rss:>7.1f} {fds:>4} {row['metrics_p50_ms']:>9.1f}ms "
                  f"{row['metrics_p99_ms']:>9.1f}ms {row['healthz_p50_ms']:>9.1f}ms "
                  f"{row['healthz_p99_ms']:>9.1f}ms {row['ok']:>6} {row['refused']:>7}",
                  flush=True)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=35)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        up.stop()
    third = [r for r in rows if r["t"] >= args.duration * 2 / 3]
    result = {
        "rows": rows, "upstream_scrapes": up.n,
        "ok": metrics.ok + health.ok, "refused": metrics.refused + health.refused,
        "errors": (metrics.errors + health.errors)[:10],
        "rss_growth_last_third_mb": round(third[-1]["rss_mb"] - third[0]["rss_mb"], 1)
        if len(third) >= 2 else 0.0,
        "fds_max": max((r["fds"] for r in rows), default=0),
        "fds_first": rows[0]["fds"] if rows else 0,
        "log_lines": len(log.read_text(errors="replace").splitlines()),
        "repeated_log_lines": repeated_lines(log.read_text(errors="replace").splitlines()),
        "log": str(log),
    }
    print(f"soak: {result['upstream_scrapes']} upstream scrapes, {result['ok']} answers, "
          f"{result['refused']} refused; RSS growth over the last third "
          f"{result['rss_growth_last_third_mb']} MB; fds {result['fds_first']} → max "
          f"{result['fds_max']}; {result['log_lines']} log lines")
    return result


def repeated_lines(lines: list[str]) -> int:
    """How many log lines repeat the line before them from the same logger, timestamps
    aside: a problem logged again while nothing changed. The sidecar logs one line per
    change of a target's problem, so this is 0 however many scrapes a run makes."""
    last: dict[str, str] = {}
    repeated = 0
    for line in lines:
        parts = line.split(" ", 4)  # date, time, level, logger, message
        if len(parts) < 5:
            continue
        logger, text = parts[3], parts[2] + " " + parts[4]
        repeated += last.get(logger) == text
        last[logger] = text
    return repeated


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=300.0, help="seconds (default 300)")
    p.add_argument("--scrapers", type=int, default=4, help="concurrent /metrics clients")
    p.add_argument("--pause", type=float, default=0.1,
                   help="seconds each client waits between requests")
    p.add_argument("--models", type=int, default=300, help="models per exposition")
    p.add_argument("--churn", type=int, default=20, help="models renamed every scrape")
    p.add_argument("--interval", type=float, default=0.5, help="scrape interval, seconds")
    p.add_argument("--forget", type=float, default=30.0,
                   help="the SLO engine forgets a model gone this many seconds")
    p.add_argument("--max-models", type=int, default=1000, help="models per SLO at most")
    p.add_argument("--report", type=float, default=10.0, help="seconds between rows")
    p.add_argument("--json", type=Path, help="write the rows and totals here")
    args = p.parse_args(argv)
    result = soak(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 1 if result["refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
