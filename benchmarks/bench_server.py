"""Benchmark of the sidecar as a server: /metrics CPU per request, concurrent scrapers,
/healthz latency under them, and the scrape cycle under model-name churn.

    ./dev bench            (or: python benchmarks/bench_server.py [--seconds N])

Each for two upstreams: Triton with 1000 models and vLLM with 64 engines.

* An upstream test double (its own process) serves a 1000-model Triton exposition
  (``bench_pipeline.triton_exposition``) with Triton's model configuration and readiness
  endpoints, or the real vLLM 0.33 capture repeated for 64 engines
  (``bench_pipeline.vllm_exposition``) with ``/health``; in churn mode every
  ``/metrics`` GET replaces 10 % of the model names (Triton's ``model``, vLLM's
  ``model_name`` of a tenth of the engines).
* ``fleetwatch serve`` (its own process) scrapes it once (interval 600 s: no scrape while
  measuring); its CPU time (``/proc/<pid>/stat``) over sequential gzip and plain
  ``/metrics`` requests gives CPU per request; then 16 concurrent gzip scrapers for
  ``--seconds`` give requests/s while a 17th client asks ``/healthz`` every 20 ms (p50,
  p99, max latency).
* The churn cycle: a Scraper in a subprocess scrapes the churning double, with and without
  ``api_url`` (runtime discovery and readiness probes): the same sidecar first reads it
  unchanged (steady), then churning; CPU per cycle (medians) and RSS (the highest of
  each phase). vLLM has no ``api_url`` (runtime discovery is Triton's): its churn runs
  without it only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_pipeline import triton_exposition, vllm_exposition  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
#: The churning double serves this many expositions unchanged first (the steady state).
CHURN_AFTER = 8
#: The upstreams measured: kind → (what the figures say it is, size).
_ENGINE = re.compile(r'engine="(\d+)"')
UPSTREAMS = {"triton": ("Triton 1000 models", 1000), "vllm": ("vLLM 64 engines", 64)}


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


# -- the upstream test double ------------------------------------------------------------
def _exposition(kind: str, size: int, names: list[str]) -> str:
    if kind == "triton":
        return triton_exposition(size, names)
    out = []
    for line in vllm_exposition(size).splitlines():  # engine e serves names[e]
        m = _ENGINE.search(line)
        out.append(line.replace('model_name="feas-model"',
                                f'model_name="{names[int(m.group(1))]}"') if m else line)
    return "\n".join(out) + "\n"


def serve_upstream(port: int, churn: bool, kind: str) -> None:
    """Triton's /metrics, /v2/models/<m>/config and /ready, or vLLM's /metrics and /health
    (test doubles), forever."""
    from aiohttp import web

    size = UPSTREAMS[kind][1]
    names = [f"model_{i:05d}" for i in range(size)]
    state = {"next": size, "cycle": 0, "gets": 0, "text": _exposition(kind, size, names)}

    async def metrics(_request: web.Request) -> web.Response:
        state["gets"] += 1
        if churn and state["gets"] > CHURN_AFTER:
            c, step = state["cycle"], max(1, size // 10)
            for i in range(step):  # 10 % new names per scrape
                names[(c * step + i) % size] = f"model_{state['next']:05d}"
                state["next"] += 1
            state["cycle"] += 1
            state["text"] = _exposition(kind, size, names)
        return web.Response(text=state["text"], content_type="text/plain")

    async def config(_request: web.Request) -> web.Response:
        return web.json_response({"backend": "onnxruntime"})

    async def ready(_request: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v2/models/{model}/config", config)
    app.router.add_get("/v2/models/{model}/ready", ready)
    app.router.add_get("/health", ready)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


async def _wait_http(url: str, seconds: float = 60) -> None:
    import aiohttp

    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            try:
                async with s.get(url) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


# -- /metrics and /healthz ---------------------------------------------------------------
async def _server_figures(kind: str, seconds: float) -> dict:
    import aiohttp

    up_port, port = _free_port(), _free_port()
    upstream = _start([__file__, "--upstream", str(up_port), "--kind", kind])
    cfg = Path(tempfile.mkdtemp(prefix="fw-bench-")) / "sidecar.yaml"
    cfg.write_text(json.dumps({
        "listen": {"address": "127.0.0.1", "port": port},
        "scrape": {"interval_seconds": 600, "timeout_seconds": 60},
        "targets": [{"name": kind, "kind": kind,
                     "url": f"http://127.0.0.1:{up_port}/metrics"}]}))
    sidecar = _start(["-c", "from fleetwatch.cli import main; main()", "serve", "--config",
                      str(cfg)])
    out: dict = {}
    try:
        await _wait_http(f"http://127.0.0.1:{up_port}/metrics")
        await _wait_http(f"http://127.0.0.1:{port}/healthz")
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            while True:  # the first scrape is done once /metrics carries the models
                async with s.get(f"{base}/metrics",
                                 headers={"Accept-Encoding": "identity"}) as r:
                    if b"modelserver_" in await r.read():
                        break
                await asyncio.sleep(0.2)
            for coding in ("gzip", "identity"):
                n = 40
                c0 = _cpu_of(sidecar.pid)
                size = 0
                for _ in range(n):
                    async with s.get(f"{base}/metrics",
                                     headers={"Accept-Encoding": coding}) as r:
                        size = len(await r.read())
                out[coding] = {"cpu_ms": (_cpu_of(sidecar.pid) - c0) / n * 1e3,
                               "bytes": size}
            done = 0
            health: list[float] = []
            stop = time.monotonic() + seconds

            async def scraper() -> None:
                nonlocal done
                while time.monotonic() < stop:
                    async with s.get(f"{base}/metrics",
                                     headers={"Accept-Encoding": "gzip"}) as r:
                        await r.read()
                    done += 1

            async def prober() -> None:
                while time.monotonic() < stop:
                    t0 = time.perf_counter()
                    async with s.get(f"{base}/healthz") as r:
                        await r.read()
                    health.append(time.perf_counter() - t0)
                    await asyncio.sleep(0.02)

            c0, t0 = _cpu_of(sidecar.pid), time.monotonic()
            await asyncio.gather(prober(), *(scraper() for _ in range(16)))
            elapsed = time.monotonic() - t0
            health.sort()
            out["concurrent"] = {
                "req_s": done / elapsed, "cpu_ms": (_cpu_of(sidecar.pid) - c0) / done * 1e3,
                "healthz_p50_ms": statistics.median(health) * 1e3,
                "healthz_p99_ms": health[int(len(health) * 0.99)] * 1e3,
                "healthz_max_ms": health[-1] * 1e3, "healthz_n": len(health)}
    finally:
        for p in (sidecar, upstream):
            p.terminate()
            p.wait(10)
    return out


# -- churn -----------------------------------------------------------------------------
def churn_case(kind: str, api: bool, cycles: int) -> dict:
    """Run in a subprocess: a Scraper against the churning double; CPU per cycle, RSS."""
    from fleetwatch.sidecar.config import parse_config
    from fleetwatch.sidecar.scraper import Scraper

    async def run() -> dict:
        port = _free_port()
        upstream = _start([__file__, "--upstream", str(port), "--churn", "--kind", kind])
        try:
            await _wait_http(f"http://127.0.0.1:{port}/health")
            base = f"http://127.0.0.1:{port}"
            target = {"name": "t", "kind": kind, "url": f"{base}/metrics"}
            if api:
                target["api_url"] = base
            cfg = parse_config({"scrape": {"interval_seconds": 60, "timeout_seconds": 60},
                                "targets": [target]})
            times, rss = [], []
            async with Scraper(cfg) as scraper:  # one sidecar: steady, then churn
                for _ in range(CHURN_AFTER + cycles):
                    t0 = time.process_time()
                    await scraper.scrape_once()
                    times.append(time.process_time() - t0)
                    rss.append(_rss_mb())
                assert scraper.states["t"].up
            return {"steady": {"cycle_ms": statistics.median(times[2:CHURN_AFTER]) * 1e3,
                               "rss_mb": max(rss[2:CHURN_AFTER])},
                    "churn": {"cycle_ms": statistics.median(times[CHURN_AFTER:]) * 1e3,
                              "rss_mb": max(rss[CHURN_AFTER:])}}
        finally:
            upstream.terminate()
            upstream.wait(10)

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--cycles", type=int, default=12)
    ap.add_argument("--kinds", default="triton,vllm", help="upstreams to measure")
    ap.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--kind", default="triton", choices=sorted(UPSTREAMS),
                    help=argparse.SUPPRESS)
    ap.add_argument("--churn", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--churn-case", choices=["api", "plain"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.upstream:
        serve_upstream(args.upstream, args.churn, args.kind)
        return
    if args.churn_case:
        print(json.dumps(churn_case(args.kind, args.churn_case == "api", args.cycles)))
        return
    for kind in args.kinds.split(","):
        report(kind, args.seconds, args.cycles)


def report(kind: str, seconds: float, cycles: int) -> None:
    """Measure and print the /metrics and churn figures of one upstream kind."""
    what = UPSTREAMS[kind][0]
    r = asyncio.run(_server_figures(kind, seconds))
    print(f"\n/metrics of a sidecar serving {what} (its own process; CPU from "
          "/proc/<pid>/stat)")
    g, p, c = r["gzip"], r["identity"], r["concurrent"]
    print(f"  gzip scrape:  {g['cpu_ms']:6.2f} ms CPU per request, {g['bytes'] / 1e6:.2f} MB")
    print(f"  plain scrape: {p['cpu_ms']:6.2f} ms CPU per request, {p['bytes'] / 1e6:.2f} MB")
    print(f"  16 concurrent gzip scrapers for {seconds:.0f} s: {c['req_s']:.0f} req/s "
          f"({c['cpu_ms']:.2f} ms CPU per request; the clients share the 2 cores)")
    print(f"  /healthz meanwhile (every 20 ms, n={c['healthz_n']}): p50 "
          f"{c['healthz_p50_ms']:.1f} ms, p99 {c['healthz_p99_ms']:.1f} ms, max "
          f"{c['healthz_max_ms']:.1f} ms")
    print(f"\nScrape cycle under churn (10 % new model names per scrape, {what}; "
          "CPU of the sidecar's process per cycle, median)")
    cases = ("plain", "api") if kind == "triton" else ("plain",)
    churn = {}
    for case in cases:
        res = subprocess.run([sys.executable, __file__, "--churn-case", case, "--kind", kind,
                              "--cycles", str(cycles)], capture_output=True, text=True,
                             check=True)
        churn[case] = json.loads(res.stdout)
    for case in cases:
        label = "with api_url" if case == "api" else "without api_url"
        s, ch = churn[case]["steady"], churn[case]["churn"]
        print(f"  {label:<16} steady {s['cycle_ms']:7.1f} ms, churn {ch['cycle_ms']:7.1f} ms; "
              f"RSS steady {s['rss_mb']:.0f} MB, under churn {ch['rss_mb']:.0f} MB "
              f"({ch['rss_mb'] / s['rss_mb']:.2f}×)")
    if "api" in churn:
        print(f"  churn with api_url / without: "
              f"{churn['api']['churn']['cycle_ms'] / churn['plain']['churn']['cycle_ms']:.2f}×")
    else:
        print("  (vLLM has no api_url: runtime discovery is Triton's)")


if __name__ == "__main__":
    main()
