"""Shared test helpers (no fixtures here; see conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "expositions"
GOLDEN = ROOT / "tests" / "golden"


def require_vllm() -> None:
    """Fail (under CI=true) or skip (elsewhere, with the reason) when vLLM is not provisioned."""
    import os

    import pytest

    from fleetwatch.demo.vllm import (
        VLLMStartError,
        find_vllm_model,
        find_vllm_python,
        find_vllm_sweep_model,
    )

    try:
        find_vllm_python()
        find_vllm_model()
        find_vllm_sweep_model()
    except VLLMStartError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {exc}")
        print(f"\nskipping real-vLLM tests: {exc}")
        pytest.skip(str(exc))


def fixture_files() -> list[Path]:
    """Every captured exposition under tests/fixtures/expositions (SOURCES.md excluded)."""
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "SOURCES.md")


class PrometheusProcess:
    """A real ``prometheus`` (Debian package) on a free loopback port, scraping ``targets``
    (``host:port``) every ``scrape_interval`` and evaluating ``recording`` rules
    (``[(record, expr)]``) at the same interval; stopped and its data removed on exit.

    Raises ``RuntimeError`` (never skips) when the binary is missing or does not start.
    """

    def __init__(self, targets: list[str], recording: list[tuple[str, str]] | None = None,
                 scrape_interval: str = "1s") -> None:
        import shutil
        import tempfile

        if shutil.which("prometheus") is None:
            raise RuntimeError("prometheus not found: install Debian's prometheus (.ci/run)")
        self.dir = Path(tempfile.mkdtemp(prefix="fw-prom-"))
        self.log = self.dir / "prometheus.log"
        self.proc = None
        self.url = ""
        rule_files = []
        if recording:
            rules = self.dir / "rules.json"
            rules.write_text(json.dumps({"groups": [{
                "name": "fleetwatch-recording", "interval": scrape_interval,
                "rules": [{"record": r, "expr": e} for r, e in recording]}]}))
            rule_files.append(str(rules))
        (self.dir / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                       "evaluation_interval": scrape_interval},
            "rule_files": rule_files,
            "scrape_configs": [{"job_name": "fleetwatch",
                                "static_configs": [{"targets": targets}]}]}))

    def __enter__(self) -> PrometheusProcess:
        import subprocess

        for _attempt in range(3):  # a free port can be taken before prometheus binds it
            self.url = f"http://127.0.0.1:{_free_port()}"
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    ["prometheus", f"--config.file={self.dir / 'prometheus.yml'}",
                     f"--storage.tsdb.path={self.dir / 'data'}",
                     f"--web.listen-address={self.url[7:]}", "--log.level=warn"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    time.sleep(0.2)
            self._stop()
        log_tail = self.log.read_text()[-3000:]
        self.__exit__()
        raise RuntimeError(f"prometheus did not start:\n{log_tail}")

    def _stop(self) -> None:
        import subprocess

        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __exit__(self, *exc: object) -> None:
        import shutil

        self._stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def api(self, path: str, **params: object) -> dict:
        """``GET /api/v1/<path>``; a 400/422 answer (a bad query) is returned, not raised."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as exc:
            return json.load(exc)

    def query(self, expr: str) -> list[dict]:
        """Instant query; the result vector."""
        return self.api("query", query=expr)["data"]["result"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- Normalizing expositions and feeding the SLO engine ---------------------------------------
# The import paths of the normalizer and the SLO engine are being refactored: the tests of
# real vLLM import them only here, so a merge changes these lines and nothing else.


def normalize(text: str, source: str = "vllm"):
    """``text`` (a /metrics body of ``source``: triton, vllm, dcgm) normalized, as the
    sidecar's scraper does it (a fresh normalizer, no registry): a ``Normalized``."""
    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.sources import TABLES

    return Normalizer(TABLES[source]).normalize(text)


def normalized_samples(text: str, source: str = "vllm") -> list[tuple[str, dict[str, str], float]]:
    """``[(name, labels, value)]`` of the normalized exposition of ``text``."""
    from fleetwatch.exporters.parser import split_key

    out = []
    for prefix, value in normalize(text, source).samples():
        name, labels = split_key(prefix)
        out.append((name, dict(labels), float(value)))
    return out


def upstream_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """``[(name, labels, value)]`` of an upstream exposition, read by prometheus_client's
    parser (independent of fleetwatch's); sample names as written (``…_total``, ``_bucket``)."""
    from prometheus_client.parser import text_string_to_metric_families

    return [(s.name, dict(s.labels), float(s.value))
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def pick(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """Σ of the ``name`` samples whose labels include ``labels`` (0.0 when none match)."""
    return sum(v for n, lab, v in samples
               if n == name and all(lab.get(k) == want for k, want in labels.items()))


def buckets(samples: list[tuple[str, dict[str, str], float]], name: str,
            **labels: str) -> dict[float, float]:
    """``{le: cumulative count}`` of histogram ``name`` (``name`` without ``_bucket``)."""
    out: dict[float, float] = {}
    for n, lab, v in samples:
        if n == name + "_bucket" and all(lab.get(k) == w for k, w in labels.items()):
            le = float(lab["le"])
            out[le] = out.get(le, 0.0) + v
    return out


class SLOReplay:
    """The SLO engine fed captured expositions in order, as the sidecar feeds it snapshots:
    one normalizer per target kept across captures (``feed(unix_seconds, text)``).

    ``slos`` is an SLO file as a dict (the YAML's structure); ``status()`` is the engine's
    JSON-ready status (the sidecar's ``/slo`` rows)."""

    def __init__(self, slos: dict, source: str = "vllm", target: str = "vllm") -> None:
        from fleetwatch.exporters.normalize import Normalizer
        from fleetwatch.exporters.sources import TABLES
        from fleetwatch.slo.engine import SLOEngine
        from fleetwatch.slo.spec import parse_slo_file

        self.engine = SLOEngine(parse_slo_file(slos))
        self.target = target
        self._normalizer = Normalizer(TABLES[source])

    def feed(self, timestamp: float, text: str) -> None:
        from fleetwatch.exporters.snapshot import Snapshot

        snap = Snapshot(timestamp, {self.target: self._normalizer.normalize(text)})
        self.engine.update(snap)

    def status(self) -> list[dict]:
        return self.engine.status()

    @staticmethod
    def burn_rate(good: float, total: float, objective: float) -> float:
        """The engine's burn rate of ``good`` of ``total`` events against ``objective``."""
        from fleetwatch.slo.bands import burn_rate

        return burn_rate(good, total, objective)


# -- the sidecar in a thread ---------------------------------------------------------------


class SidecarThread:
    """The sidecar (``run_sidecar`` with the SLO engine) on its own event loop in a thread."""

    def __init__(self, cfg, registry, slos) -> None:
        import asyncio

        from fleetwatch.sidecar.server import run_sidecar

        self.port = 0
        self._ready = threading.Event()
        self._box: dict = {}

        async def main() -> None:
            self._box["loop"] = asyncio.get_running_loop()
            self._box["stop"] = asyncio.Event()
            await run_sidecar(cfg, registry, stop=self._box["stop"], on_ready=self._on_ready,
                              slos=slos)

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True,
                                        name="fleetwatch-sidecar")

    def _on_ready(self, port: int) -> None:
        self.port = port
        self._ready.set()

    def start(self) -> SidecarThread:
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("sidecar did not start within 15 s")
        return self

    def stop(self) -> None:
        loop, stop = self._box.get("loop"), self._box.get("stop")
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        self._thread.join(15)


def wait_until(pred, what: str, seconds: float = 30.0):  # type: ignore[no-untyped-def]
    """Poll ``pred()`` every 0.25 s until it is truthy and return that value; fail the
    test saying ``what`` after ``seconds``."""
    import pytest

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.25)
    pytest.fail(f"{what}: not within {seconds:g} s")


class Held(NamedTuple):
    """What this process holds: threads (the kernel's, native ones included) and open
    file descriptors."""

    threads: int
    descriptors: int


def held() -> Held:
    """This process's threads and descriptors now (Linux ``/proc``)."""
    return Held(len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd")))


def held_at_rest(seconds: float = 15.0) -> Held:
    """What this process holds once it stopped changing (the same two readings a second
    apart; at most ``seconds``): gRPC starts and ends threads of its own as it goes."""
    last, deadline = held(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = held()
        if now == last:
            return now
        last = now
    return last


def settles_back(before: Held, what: str, seconds: float = 15.0) -> None:
    """Wait until this process holds no more than it held ``before`` (take it with
    :func:`held_at_rest`; a worker may still be exiting when a call returns); fail naming
    ``what`` if it never does (a leak never settles)."""
    def back() -> bool:
        now = held()
        return now.threads <= before.threads and now.descriptors <= before.descriptors

    wait_until(back,
               f"{what}: back to {before}", seconds)


def tool(name: str) -> str:
    """The path of a Debian-packaged tool the test needs (promtool, amtool); the test fails,
    naming the packages, when it is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: install Debian's prometheus and "
                    "prometheus-alertmanager packages (.ci/run does)", pytrace=False)
    return path
