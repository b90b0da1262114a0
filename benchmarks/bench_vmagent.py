"""Benchmark: CPU per scrape cycle of the whole sidecar against vmagent doing the same job.

    ./dev bench            (or: python benchmarks/bench_vmagent.py [--seconds N] [--rounds N])

What fleetwatch replaces for Triton is, at its simplest, a scraping agent that renames
the upstream series; this benchmark says what the sidecar's extra work (normalization
into one schema) costs next to such an agent.

* An upstream test double (its own process) serves a 1000-model Triton exposition
  (``bench_pipeline.triton_exposition``, 48 000 samples) on loopback — static (the same
  body every scrape), then busy (a tenth of the values moved at every scrape, as
  ``bench_pipeline`` measures) — and accepts Prometheus remote-write requests
  (``/api/v1/write``, answered 204) for vmagent. It counts the ``/metrics`` GETs it
  answered: the cycles.
* The sidecar: ``fleetwatch serve`` (its own process) scrapes the double every second
  and is itself scraped every second with ``Accept-Encoding: gzip`` by this script: one
  cycle is fetch, parse, normalize, render and gzip.
* vmagent (Debian's ``victoria-metrics`` package, ``/usr/bin/vmagent``) scrapes the same
  exposition every second with ``metric_relabel_configs`` that rename each Triton family
  to the normalized name and ``version`` to ``model_version``, and remote-writes the
  result to the double: one cycle is fetch, parse, relabel, compress and send.
* Each runs alone (the other stopped) for ``--seconds``, after a warm-up; CPU is user +
  system time from ``/proc/<pid>/stat``; per cycle = CPU ÷ the double's GETs meanwhile
  (one a second, fewer when a scrape is late). ``--rounds`` alternates them; the medians
  and their ratio are printed.

Without vmagent the comparison is skipped with one line saying how to install it
(benchmarks are not tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_pipeline import COUNTERS, SUMMARIES, changed_values, triton_exposition  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
MODELS = 1000
#: Seconds each process runs before it is measured (first scrapes, caches, allocations).
WARMUP_S = 5.0

#: The Triton families of the exposition and the normalized name vmagent renames them to
#: (the sidecar's mapping, ``fleetwatch schema``; vmagent only renames, it does not
#: convert units or split families).
RENAMES = {
    "nv_inference_request_success": "modelserver_requests_total",
    "nv_inference_request_failure": "modelserver_request_failures_total",
    "nv_inference_count": "modelserver_batch_items_total",
    "nv_inference_exec_count": "modelserver_batch_executions_total",
    "nv_inference_request_duration_us": "modelserver_request_duration_microseconds_sum",
    "nv_inference_queue_duration_us": "modelserver_queue_duration_microseconds_sum",
    "nv_inference_compute_input_duration_us": "modelserver_compute_input_microseconds_sum",
    "nv_inference_compute_infer_duration_us": "modelserver_compute_infer_microseconds_sum",
    "nv_inference_compute_output_duration_us": "modelserver_compute_output_microseconds_sum",
    "nv_inference_pending_request_count": "modelserver_requests_active",
    "nv_inference_request_summary_us": "modelserver_request_duration_summary_microseconds",
    "nv_inference_queue_summary_us": "modelserver_queue_duration_summary_microseconds",
    "nv_inference_compute_input_summary_us": "modelserver_compute_input_summary_microseconds",
    "nv_inference_compute_infer_summary_us": "modelserver_compute_infer_summary_microseconds",
    "nv_inference_compute_output_summary_us": "modelserver_compute_output_summary_microseconds",
}
assert set(COUNTERS) | set(SUMMARIES) <= set(RENAMES)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_upstream(port: int, busy: bool) -> None:
    """The test double, forever: Triton's ``/metrics`` (static, or with ``busy`` every
    tenth sample's value moved at each GET: :func:`bench_pipeline.changed_values`), a
    remote-write sink, and ``/count``: how many ``/metrics`` GETs it answered."""
    from aiohttp import web

    text = triton_exposition(MODELS)
    bodies = [changed_values(text, c) for c in range(1, 31)] if busy else [text]
    gets = [0]

    async def metrics(_request: web.Request) -> web.Response:
        gets[0] += 1
        return web.Response(text=bodies[gets[0] % len(bodies)], content_type="text/plain")

    async def count(_request: web.Request) -> web.Response:
        return web.Response(text=str(gets[0]))

    async def write(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=204)

    app = web.Application(client_max_size=64 << 20)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/count", count)
    app.router.add_post("/api/v1/write", write)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def vmagent_config(upstream: str) -> dict[str, object]:
    """vmagent's scrape configuration: the double every second, each family renamed."""
    relabel: list[dict[str, object]] = [
        {"source_labels": ["__name__"], "regex": f"{old}(_sum|_count)?",
         "target_label": "__name__", "replacement": f"{new}$1"}
        for old, new in RENAMES.items()]
    relabel += [{"action": "labelmap", "regex": "version", "replacement": "model_version"},
                {"action": "labeldrop", "regex": "version"}]
    return {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "triton", "static_configs": [
                {"targets": [upstream]}], "metric_relabel_configs": relabel}]}


async def _get(url: str, gzip: bool = False) -> bytes:
    import aiohttp

    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    async with aiohttp.ClientSession(auto_decompress=False) as s, \
            s.get(url, headers=headers) as r:
        r.raise_for_status()
        return await r.read()


async def _wait_for(url: str, needle: bytes, seconds: float = 60.0) -> None:
    import aiohttp

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if needle in await _get(url):
                return
        except (aiohttp.ClientError, OSError):
            pass
        await asyncio.sleep(0.25)
    raise RuntimeError(f"{url} did not show {needle.decode()} within {seconds:.0f} s")


async def _measure(pid: int, seconds: float, up_port: int, scrape_url: str | None) -> float:
    """CPU ms of ``pid`` per scrape of the double (its ``/count``) over ``seconds`` after
    the warm-up; with ``scrape_url``, GET it with gzip every second meanwhile (the
    sidecar's own scraper)."""
    count_url = f"http://127.0.0.1:{up_port}/count"

    async def scrape_every_second(until: float) -> None:
        while time.monotonic() < until:
            t0 = time.monotonic()
            if scrape_url:
                await _get(scrape_url, gzip=True)
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))

    await scrape_every_second(time.monotonic() + WARMUP_S)
    c0, n0 = cpu_seconds(pid), int(await _get(count_url))
    await scrape_every_second(time.monotonic() + seconds)
    c1, n1 = cpu_seconds(pid), int(await _get(count_url))
    if n1 <= n0:
        raise RuntimeError(f"no scrape of the double in {seconds:.0f} s")
    return (c1 - c0) / (n1 - n0) * 1e3


def _env() -> dict[str, str]:
    """This checkout's ``src`` first on the path, whatever the venv's install points at."""
    path = os.pathsep.join(filter(None, (str(ROOT / "src"), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path}


def _stop(p: subprocess.Popen[bytes]) -> None:
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


async def sidecar_round(up_port: int, seconds: float, work: Path) -> float:
    """One measured run of ``fleetwatch serve``: CPU ms per cycle."""
    port = free_port()
    cfg = work / "sidecar.yaml"
    cfg.write_text(json.dumps({
        "listen": {"address": "127.0.0.1", "port": port},
        "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
        "targets": [{"name": "triton", "kind": "triton",
                     "url": f"http://127.0.0.1:{up_port}/metrics"}]}))
    p = subprocess.Popen([sys.executable, "-c", "from fleetwatch.cli import main; main()",
                          "serve", "--config", str(cfg), "--log-level", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        await _wait_for(url, b"modelserver_requests_total{")
        return await _measure(p.pid, seconds, up_port, url)
    finally:
        _stop(p)


async def vmagent_round(vmagent: str, up_port: int, seconds: float, work: Path) -> float:
    """One measured run of vmagent: CPU ms per cycle."""
    port = free_port()
    cfg = work / "vmagent.json"  # JSON is YAML
    cfg.write_text(json.dumps(vmagent_config(f"127.0.0.1:{up_port}")))
    data = work / "vmagent-data"
    shutil.rmtree(data, ignore_errors=True)
    p = subprocess.Popen([vmagent, f"-promscrape.config={cfg}",
                          f"-remoteWrite.url=http://127.0.0.1:{up_port}/api/v1/write",
                          f"-remoteWrite.tmpDataPath={data}",
                          f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=ERROR"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:  # scraped and relabeled: its own scrape metrics count the renamed samples
        await _wait_for(f"http://127.0.0.1:{port}/metrics",
                        b'vm_promscrape_scrapes_total{status_code="200"}')
        return await _measure(p.pid, seconds, up_port, None)
    finally:
        _stop(p)


async def run(seconds: float, rounds: int, vmagent: str,
              busy: bool) -> tuple[list[float], list[float]]:
    """Alternate the sidecar and vmagent ``rounds`` times against one double (``busy``:
    see :func:`serve_upstream`); CPU ms per cycle of each."""
    up_port = free_port()
    upstream = subprocess.Popen([sys.executable, __file__, "--upstream", str(up_port),
                                 *(["--busy"] if busy else [])],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ours: list[float] = []
    theirs: list[float] = []
    try:
        await _wait_for(f"http://127.0.0.1:{up_port}/metrics", b"nv_inference_count{")
        with tempfile.TemporaryDirectory(prefix="fw-bench-vmagent-") as tmp:
            for _ in range(rounds):
                ours.append(await sidecar_round(up_port, seconds, Path(tmp)))
                theirs.append(await vmagent_round(vmagent, up_port, seconds, Path(tmp)))
    finally:
        _stop(upstream)
    return ours, theirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0,
                    help="measured seconds of each process per round")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternations of the two, per kind of upstream")
    ap.add_argument("--vmagent", default=shutil.which("vmagent") or "/usr/bin/vmagent")
    ap.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--busy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.upstream:
        serve_upstream(args.upstream, args.busy)
        return
    print(f"\nWhole sidecar against vmagent, Triton {MODELS} models scraped every second "
          "(CPU per cycle from /proc/<pid>/stat)")
    if not os.access(args.vmagent, os.X_OK):
        print(f"  skipped: no vmagent at {args.vmagent} (Debian: apt-get install "
              "victoria-metrics)")
        return
    for busy in (False, True):
        ours, theirs = asyncio.run(run(args.seconds, args.rounds, args.vmagent, busy))
        what = ("busy (a tenth of the values move every scrape)" if busy
                else "static (the same body every scrape)")
        print(f"  {what}:")
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True), 1):
            print(f"    round {i}: sidecar {a:6.1f} ms, vmagent {b:6.1f} ms ({a / b:.2f}×)")
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"    median of {len(ours)} rounds of {args.seconds:.0f} s: sidecar (fetch, "
              f"normalize, render, gzip) {a:.1f} ms, vmagent (fetch, relabel, remote "
              f"write) {b:.1f} ms per cycle: {a / b:.2f}×")


if __name__ == "__main__":
    main()
