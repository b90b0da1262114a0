"""A real Triton Inference Server for tests and the demo.

`TritonServer` runs the ``tritonserver`` binary bundled in the ``nvidia-pytriton`` wheel (Triton
2.51, CPU only) on a Python-backend model repository (by default the demo repository next to this
file: ``ranker``, ``streamer``, ``faulty``). It binds HTTP, gRPC and metrics to free loopback
ports, loads models explicitly and waits until each is ready.

It applies the two fixes the wheel needs (see ``research/REAL_COMPONENTS.md``): the Python
backend stub must load the running interpreter's ``libpython`` (``LD_LIBRARY_PATH`` starts with
``sysconfig.get_config_var("LIBDIR")``, then ``site-packages/nvidia_pytriton.libs``), and the
running interpreter's ``bin`` directory goes first on ``PATH`` so the stub finds the same
site-packages (numpy).

Example::

    with TritonServer(["ranker"]) as server:
        print(server.metrics_url)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import sys
import sysconfig
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetwatch.demo.process import LOOPBACK, ServerProcess, ServerStartError, http_request

__all__ = ["DEFAULT_MODEL_REPOSITORY", "DEMO_MODELS", "LOOPBACK", "TritonInstallation",
           "TritonServer", "TritonStartError", "find_triton_installation"]

#: The demo model repository shipped with fleetwatch.
DEFAULT_MODEL_REPOSITORY = Path(__file__).resolve().parent / "model_repository"
#: The models of the demo repository, in load order.
DEMO_MODELS: tuple[str, ...] = ("ranker", "streamer", "faulty")


class TritonStartError(ServerStartError):
    """tritonserver could not be found, exited early or did not become ready in time.

    The message ends with the tail of the server log when there is one.
    """


@dataclass(frozen=True)
class TritonInstallation:
    """The parts of the ``nvidia-pytriton`` wheel that `TritonServer` needs (absolute paths)."""

    binary: Path
    """``pytriton/tritonserver/bin/tritonserver``."""
    python_backend: Path
    """``pytriton/tritonserver/backends/python`` (``libtriton_python.so`` and its utils)."""
    stub: Path
    """The ``triton_python_backend_stub`` built for the running Python's major.minor."""
    libs: Path
    """``site-packages/nvidia_pytriton.libs`` (the wheel's bundled shared libraries)."""


def find_triton_installation() -> TritonInstallation:
    """Locate tritonserver, the Python backend and the matching stub in the installed wheel.

    Raises:
        TritonStartError: ``pytriton`` is not installed (the ``triton`` extra), a file is
            missing, or the wheel has no stub for the running Python version.
    """
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonStartError(
            "the 'pytriton' package is not installed; install the 'triton' extra "
            "(pip install '.[triton]' from a clone, which pins nvidia-pytriton==0.7.0, "
            "or ./dev demo)"
        )
    package = Path(next(iter(spec.submodule_search_locations))).resolve()
    root = package / "tritonserver"
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stubs = root / "python_backend_stubs"
    installation = TritonInstallation(
        binary=root / "bin" / "tritonserver",
        python_backend=root / "backends" / "python",
        stub=stubs / python_version / "triton_python_backend_stub",
        libs=package.parent / "nvidia_pytriton.libs",
    )
    if not installation.stub.is_file():
        available = sorted(p.name for p in stubs.iterdir()) if stubs.is_dir() else []
        raise TritonStartError(
            f"the installed pytriton has no Python backend stub for Python {python_version} "
            f"(looked for {installation.stub}; available: {', '.join(available) or 'none'})"
        )
    required = [
        installation.binary,
        installation.python_backend / "libtriton_python.so",
        installation.python_backend / "triton_python_backend_utils.py",
    ]
    missing = [str(path) for path in required if not path.is_file()]
    if missing:
        raise TritonStartError(f"incomplete pytriton installation, missing: {', '.join(missing)}")
    return installation


class TritonServer(ServerProcess):
    """A tritonserver process on free loopback ports, serving a Python-backend model repository.

    Use it as a context manager (``with TritonServer() as server: ...``) or call `start` and
    `stop`. Models are loaded in explicit model-control mode; `start` returns once every model
    in ``models`` reports ready.

    Args:
        models: names of the models to load at start-up (default: the three demo models).
        model_repository: the model repository directory (default: `DEFAULT_MODEL_REPOSITORY`).
        summary_latencies: enable Triton's ``*_summary_us`` latency summaries
            (``--metrics-config=summary_latencies=true``).
        metrics_interval_ms: how often Triton refreshes its polled metrics (CPU, pending
            requests), in milliseconds.
        exit_timeout_s: ``--exit-timeout-secs``: how long tritonserver itself waits for
            in-flight requests on shutdown, in seconds.
        extra_args: more ``tritonserver`` arguments, appended as given.
        ports: the HTTP, gRPC and metrics ports; None (default): free ones, chosen again
            on a clash. Given ports let a client be configured before the server starts
            (a sidecar that watches it come up); a clash is then a start error.
        start_timeout_s, stop_timeout_s, workdir, keep_workdir: as in `ServerProcess` (the
            working directory holds the backend directory and the log).
    """

    process_name = "tritonserver"
    start_error = TritonStartError
    port_count = 3
    log_name = "tritonserver.log"
    workdir_prefix = "fleetwatch-triton-"

    def __init__(
        self,
        models: Sequence[str] = DEMO_MODELS,
        model_repository: str | os.PathLike[str] | None = None,
        *,
        summary_latencies: bool = True,
        metrics_interval_ms: int = 1000,
        start_timeout_s: float = 300.0,
        stop_timeout_s: float = 15.0,
        exit_timeout_s: int = 5,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool = False,
        extra_args: Sequence[str] = (),
        ports: tuple[int, int, int] | None = None,
    ) -> None:
        """A tritonserver for ``models`` (not started). Many parameters: each a
        ``tritonserver`` option or a harness bound, keyword-only with a default."""
        if isinstance(models, str):
            raise TypeError("models must be a sequence of model names, not a string")
        super().__init__(ports=ports, start_timeout_s=start_timeout_s,
                         stop_timeout_s=stop_timeout_s, workdir=workdir,
                         keep_workdir=keep_workdir)
        self.models: tuple[str, ...] = tuple(models)
        self.model_repository = Path(
            model_repository if model_repository is not None else DEFAULT_MODEL_REPOSITORY
        ).resolve()
        self.summary_latencies = summary_latencies
        self.metrics_interval_ms = metrics_interval_ms
        self.exit_timeout_s = exit_timeout_s
        self.extra_args: tuple[str, ...] = tuple(extra_args)
        self._installation: TritonInstallation | None = None
        # Names this server's Python-backend shared-memory regions, so `stop` can remove the
        # ones a crashed tritonserver leaves in /dev/shm without touching anyone else's.
        self._shm_prefix = f"fleetwatch_{uuid.uuid4().hex[:12]}_"

    # -- addresses ---------------------------------------------------------------------------

    @property
    def http_port(self) -> int:
        """The HTTP/REST port (KServe v2 protocol)."""
        return self._port_at(0)

    @property
    def grpc_port(self) -> int:
        """The gRPC port (KServe v2 protocol)."""
        return self._port_at(1)

    @property
    def metrics_port(self) -> int:
        """The Prometheus metrics port."""
        return self._port_at(2)

    @property
    def http_url(self) -> str:
        """Base URL of the HTTP API, e.g. ``http://127.0.0.1:40123`` (no trailing slash)."""
        return f"http://{LOOPBACK}:{self.http_port}"

    @property
    def http_address(self) -> str:
        """``host:port`` of the HTTP API, the form ``tritonclient.http`` expects."""
        return f"{LOOPBACK}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``host:port`` of the gRPC API, the form ``tritonclient.grpc`` (and gRPC) expects."""
        return f"{LOOPBACK}:{self.grpc_port}"

    @property
    def grpc_address(self) -> str:
        """Same as `grpc_url`."""
        return self.grpc_url

    @property
    def metrics_url(self) -> str:
        """URL of Triton's Prometheus exposition, e.g. ``http://127.0.0.1:40125/metrics``."""
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"

    # -- lifecycle: `start` and `stop` are `ServerProcess`'s ----------------------------------
    # `start` raises `TritonStartError` when the wheel is incomplete, the repository missing,
    # or a model not ready in time. A graceful `stop` takes about 2 s (models unload first);
    # it also removes this server's Python-backend shared-memory regions from /dev/shm.

    def _preflight(self) -> None:
        self._installation = find_triton_installation()
        if not self.model_repository.is_dir():
            raise TritonStartError(f"model repository not found: {self.model_repository}")

    def _populate_workdir(self, workdir: Path) -> None:
        installation = self._installation or find_triton_installation()
        backend = workdir / "backends" / "python"
        backend.mkdir(parents=True, exist_ok=True)
        for source in (
            installation.python_backend / "libtriton_python.so",
            installation.python_backend / "triton_python_backend_utils.py",
            installation.stub,
        ):
            shutil.copy2(source, backend / source.name)

    def _environment(self) -> dict[str, str]:
        installation = self._installation or find_triton_installation()
        env = dict(os.environ)
        library_dirs = [sysconfig.get_config_var("LIBDIR") or "", str(installation.libs)]
        if env.get("LD_LIBRARY_PATH"):
            library_dirs.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(d for d in library_dirs if d)
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
        # Do not write __pycache__ into the (possibly packaged) model repository.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def _command(self) -> list[str]:
        return self.command(self._installation)

    def command(self, installation: TritonInstallation | None = None) -> list[str]:
        """The tritonserver command line for the current ports (for logs and debugging)."""
        installation = installation or find_triton_installation()
        if self._workdir is None:
            raise RuntimeError("the server has not been started")
        args = [
            str(installation.binary),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={self._workdir / 'backends'}",
            "--model-control-mode=explicit",
            *(f"--load-model={model}" for model in self.models),
            f"--http-address={LOOPBACK}",
            f"--http-port={self.http_port}",
            f"--grpc-address={LOOPBACK}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={LOOPBACK}",
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            "--allow-cpu-metrics=true",
            f"--metrics-interval-ms={self.metrics_interval_ms}",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
        ]
        if self.summary_latencies:
            args.append("--metrics-config=summary_latencies=true")
        args.extend(self.extra_args)
        return args

    def _after_terminate(self) -> None:
        for region in Path("/dev/shm").glob(f"{self._shm_prefix}*"):
            with contextlib.suppress(OSError):
                region.unlink()

    def _summarize_log(self, text: str, lines: int) -> str:
        """The log's error lines (glog ``E<date>``, at most 10), then its last ``lines`` lines.

        The start-up options table and the CPU-only "CudaDriverHelper" error are left out.
        """
        useful = [line for line in text.splitlines() if line.strip()
                  and not line.startswith(("|", "+-")) and "CudaDriverHelper" not in line]
        tail = useful[-lines:]
        errors = [line for line in useful[: len(useful) - len(tail)] if re.match(r"E\d{4} ", line)]
        return "\n".join([*errors[:10], "...", *tail] if errors else tail)

    def _wait_ready(self, deadline: float) -> None:
        self._wait_models(self.models, deadline, self.start_timeout_s)
        # The metrics service starts ~40 ms after HTTP: a scrape right after `start` must work.
        self._wait_until(lambda: http_request("GET", self.metrics_url, 2.0)[0] == 200, deadline,
                         before=lambda: "its metrics service started",
                         late=lambda: f"no metrics service after {self.start_timeout_s:g} s")

    # -- model control -----------------------------------------------------------------------

    def _request(self, method: str, path: str, timeout_s: float) -> tuple[int, bytes]:
        body = b"{}" if method == "POST" else None
        return http_request(method, self.http_url + path, timeout_s, json_body=body)

    def is_model_ready(self, name: str, version: str | None = None) -> bool:
        """True when ``/v2/models/<name>[/versions/<version>]/ready`` answers 200."""
        path = f"/v2/models/{name}" + (f"/versions/{version}" if version else "") + "/ready"
        return self._request("GET", path, timeout_s=2.0)[0] == 200

    def _wait_models(self, models: Sequence[str], deadline: float, timeout_s: float) -> None:
        pending = list(models)

        def all_ready() -> bool:
            pending[:] = [m for m in pending if not self.is_model_ready(m)]
            return not pending

        self._wait_until(
            all_ready, deadline, before=lambda: f"{', '.join(pending)} became ready",
            late=lambda: f"{', '.join(pending)} not ready after {timeout_s:g} s")

    def load_model(self, name: str, timeout_s: float = 60.0) -> None:
        """Load (or reload) ``name`` from the repository and wait until it is ready.

        A reload restarts the model's Triton counters at 0.

        Raises:
            TritonStartError: Triton refused the load, or the model is not ready within
                ``timeout_s`` seconds (the message carries Triton's error or the log tail).
            RuntimeError: the server is not running.
        """
        if not self.running:
            raise RuntimeError("the server is not running")
        deadline = time.monotonic() + timeout_s
        status, body = self._request("POST", f"/v2/repository/models/{name}/load", timeout_s)
        if status != 200:
            raise TritonStartError(
                f"loading {name!r} failed (HTTP {status}): {_error_text(body)}\n"
                f"{self.log_tail()}"
            )
        self._wait_models([name], deadline, timeout_s)

    def unload_model(self, name: str, timeout_s: float = 90.0) -> None:
        """Unload ``name`` and wait (at most ``timeout_s`` seconds) until it is fully unloaded.

        Triton answers the unload request at once and stops the model in the background
        (about 1 s for a Python-backend model); this waits until the repository index no
        longer shows any version of ``name`` as READY, LOADING or UNLOADING.

        Raises:
            TritonStartError: Triton refused the unload or the model did not finish unloading.
            RuntimeError: the server is not running.
        """
        if not self.running:
            raise RuntimeError("the server is not running")
        deadline = time.monotonic() + timeout_s
        status, body = self._request("POST", f"/v2/repository/models/{name}/unload", timeout_s)
        if status != 200:
            raise TritonStartError(
                f"unloading {name!r} failed (HTTP {status}): {_error_text(body)}"
            )
        busy = {"READY", "LOADING", "UNLOADING"}
        while entries := [entry for entry in self.repository_index()
                          if entry.get("name") == name and entry.get("state") in busy]:
            if time.monotonic() >= deadline:
                raise TritonStartError(
                    f"{name!r} still not unloaded {timeout_s:g} s after unload: {entries}\n"
                    f"{self.log_tail()}"
                )
            time.sleep(self.poll_interval_s)

    def repository_index(self) -> list[dict[str, str]]:
        """Triton's repository index: one entry per model (and loaded version) with its state.

        Entries look like ``{"name": "faulty", "version": "1", "state": "READY"}``; models never
        loaded have only a name.

        Raises:
            TritonStartError: the index request failed.
        """
        status, body = self._request("POST", "/v2/repository/index", timeout_s=5.0)
        if status != 200:
            raise TritonStartError(f"repository index failed (HTTP {status}): {_error_text(body)}")
        return list(json.loads(body))

    def __repr__(self) -> str:
        state = f"pid={self.pid}, http={self.http_url}" if self.running else "stopped"
        return f"TritonServer(models={list(self.models)!r}, {state})"


def _error_text(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", body.decode(errors="replace")))
    except (ValueError, AttributeError):
        return body.decode(errors="replace")
