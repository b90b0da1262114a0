"""Harness of the hostile suite: the CLI and a real ``fleetwatch serve`` process, driven
from outside (subprocess, HTTP), so the tests do not depend on the package's layout.

* :func:`cli` runs ``fleetwatch …`` (``python -m``-style, with this interpreter and its
  ``PYTHONPATH``) and returns the completed process;
* :class:`Upstream` is a test double of a model server: a threaded HTTP server on a free
  loopback port whose ``/metrics`` body comes from a function of the request number,
  and whose ``/health`` answers a chosen status (or hangs);
* :class:`Sidecar` runs ``fleetwatch serve`` on a free port with a configuration (and an
  SLO file) written to a temporary folder, learns its port from its log line, and stops
  it (SIGTERM, then SIGKILL) on exit; :meth:`Sidecar.get` is one HTTP GET.
"""

from __future__ import annotations

import http.server
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

_MAIN = "import sys; from fleetwatch.cli import main; sys.exit(main())"


def cli(*args: str, stdin: str | None = None, timeout: float = 60.0,
        cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """``fleetwatch ARGS`` as a subprocess (text output, never raises on its exit code)."""
    return subprocess.run([sys.executable, "-c", _MAIN, *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def strict_json(text: str) -> Any:
    """Parse JSON refusing ``NaN``/``Infinity`` (what Python's json accepts by default)."""
    def no_constant(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=no_constant)


class Upstream:
    """A model-server test double (see module docstring). ``body(n)`` gives the text of
    the n-th ``/metrics`` answer (n from 0); ``health_status`` is what ``/health``
    answers (None: it hangs until the client gives up)."""

    def __init__(self, body: Callable[[int], str]) -> None:
        self.body = body
        self.requests = 0
        self.health_status: int | None = 200
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/health"):
                    if outer.health_status is None:
                        time.sleep(3)
                        return
                    self._send(outer.health_status, b"")
                    return
                n = outer.requests
                outer.requests += 1
                self._send(200, outer.body(n).encode())

            def _send(self, status: int, data: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_requests(self, n: int, timeout: float = 20.0) -> None:
        """Wait until ``/metrics`` was asked ``n`` times in all."""
        deadline = time.monotonic() + timeout
        while self.requests < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"upstream asked {self.requests} times, not {n}")
            time.sleep(0.02)


class Sidecar:
    """``fleetwatch serve`` as a subprocess (see module docstring). ``config`` is the
    sidecar configuration (``listen`` defaults to 127.0.0.1 port 0); ``slos`` an SLO file;
    ``registry`` a registry file's content."""

    def __init__(self, config: dict[str, Any], slos: dict[str, Any] | None = None,
                 registry: dict[str, Any] | None = None, max_fds: int | None = None) -> None:
        self.max_fds = max_fds  # RLIMIT_NOFILE (soft and hard) of the process
        self.dir = Path(tempfile.mkdtemp(prefix="fw-hostile-"))
        cfg = {"listen": {"address": "127.0.0.1", "port": 0}, **config}
        if "listen" in config:
            cfg["listen"] = {"address": "127.0.0.1", "port": 0, **config["listen"]}
        if registry is not None:
            (self.dir / "registry.yaml").write_text(yaml.safe_dump(registry))
            cfg["registry"] = "registry.yaml"
        (self.dir / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
        self.args = ["serve", "--config", str(self.dir / "sidecar.yaml")]
        if slos is not None:
            (self.dir / "slos.yaml").write_text(yaml.safe_dump(slos))
            self.args += ["--slos", str(self.dir / "slos.yaml")]
        self.log_path = self.dir / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._final_log = ""

    def __enter__(self) -> Sidecar:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", _MAIN, *self.args],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         preexec_fn=self._limit if self.max_fds else None)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(r"serving on http://[^:]+:(\d+)/metrics", self.log())
            if m:
                self.port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        log_text = self.log()
        self.__exit__()
        raise AssertionError(f"fleetwatch serve did not start:\n{log_text[-3000:]}")

    def _limit(self) -> None:
        import resource

        assert self.max_fds is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_fds, self.max_fds))

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        # the folder goes; its log stays readable for the assertions after the block
        self._final_log = self.log()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        """Everything the sidecar logged so far (all of it once stopped)."""
        if self.log_path.exists():
            return self.log_path.read_text(errors="replace")
        return self._final_log

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, str, float]:
        """``(status, body, seconds)`` of ``GET path``."""
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}",
                                        timeout=timeout) as r:
                return r.status, r.read().decode(), time.perf_counter() - t0
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), time.perf_counter() - t0

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one series of ``/metrics`` (labels given must match), or None.
        The wait bounds a hung sidecar, not its speed: a /metrics of thousands of models
        on a starved machine takes seconds."""
        _status, body, _ = self.get("/metrics", timeout=120)
        for line in body.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None

    def wait_metric(self, name: str, value: float, timeout: float = 30.0,
                    **labels: str) -> None:
        """Wait until one series of ``/metrics`` (labels given must match) reads ``value``;
        raises ``AssertionError`` with the last value read after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (seen := self.metric(name, **labels)) != value:
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}{labels} read {seen}, not {value}, "
                                     f"for {timeout} s")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def promtool_errors(text: str) -> list[str]:
    """What ``promtool check metrics`` rejects in an exposition: parse errors and
    duplicates (lint findings, which upstream names passed through may have, are not
    errors). Raises when promtool is missing (never skips)."""

    if shutil.which("promtool") is None:
        raise RuntimeError("promtool not found: install Debian's prometheus (.ci/run)")
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=60)
    return [line for line in (res.stdout + res.stderr).splitlines()
            if "error" in line.lower() or "second HELP" in line or "second TYPE" in line
            or "duplicate" in line]


def finite_numbers(obj: Any) -> bool:
    """Whether every number in a JSON document is finite."""
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(finite_numbers(v) for v in obj.values())
    if isinstance(obj, list):
        return all(finite_numbers(v) for v in obj)
    return True
