"""Shared test helpers (no fixtures here; see conftest.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "expositions"
GOLDEN = ROOT / "tests" / "golden"


def fixture_files() -> list[Path]:
    """Every captured exposition under tests/fixtures/expositions (SOURCES.md excluded)."""
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "SOURCES.md")


class PrometheusProcess:
    """A real ``prometheus`` (Debian package) on a free loopback port, scraping ``targets``
    (``host:port`` strings) every second; stopped and its data removed on exit."""

    def __init__(self, targets: list[str], rule_files: list[str] | None = None,
                 scrape_interval: str = "1s") -> None:
        import shutil
        import tempfile

        if shutil.which("prometheus") is None:
            raise RuntimeError("prometheus not found: install Debian's prometheus (.ci/run)")
        self.targets = targets
        self.rule_files = rule_files or []
        self.scrape_interval = scrape_interval
        self.dir = Path(tempfile.mkdtemp(prefix="fw-prom-"))
        self.proc = None
        self.port = 0

    def __enter__(self) -> PrometheusProcess:
        import json
        import socket
        import subprocess
        import time
        import urllib.request

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        cfg = {"global": {"scrape_interval": self.scrape_interval,
                          "evaluation_interval": self.scrape_interval},
               "rule_files": self.rule_files,
               "scrape_configs": [{"job_name": "fleetwatch",
                                   "static_configs": [{"targets": self.targets}]}]}
        (self.dir / "prometheus.yml").write_text(json.dumps(cfg))
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=open(self.dir / "log", "w"))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"prometheus did not start: {(self.dir / 'log').read_text()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        import shutil

        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expr: str) -> list[dict]:
        """Instant query; the result vector."""
        import json
        import urllib.parse
        import urllib.request

        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as r:
            return json.load(r)["data"]["result"]
