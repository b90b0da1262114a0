"""What the demo's server harnesses share: a server process on free loopback ports.

`ServerProcess` is the base of `fleetwatch.demo.triton.TritonServer` and
`fleetwatch.demo.vllm.VLLMServer`. It owns the life cycle both need: a working directory (a
fresh temporary one, or a given one that is never removed) with the server log in it; free
loopback ports, chosen again when the server reports them taken (up to three attempts);
spawning the server in its own session, so that a terminal's Ctrl-C does not reach it and a
stop can kill the whole process group (tritonserver's backend stubs, vLLM's engine core and
worker); SIGTERM, then SIGKILL to the group, then waiting until the group is gone; the
context manager; stopping every server still running at interpreter exit; the tail of the
log in start errors; and HTTP helpers.

A subclass says what differs: `_preflight` (find the binary or the venv), `_command`,
`_environment`, `_wait_ready`, `_populate_workdir`, `_after_terminate`, `_exit_hint`,
`_summarize_log`, `metrics_url`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import ClassVar, TypeVar

from fleetwatch.demo.procs import (
    LOOPBACK,
    free_ports,
    group_listens,
    http_request,
    kill_group,
    wait_group_gone,
)

__all__ = [
    "LOOPBACK",
    "ServerProcess",
    "ServerStartError",
    "free_ports",
    "http_request",
]

_LOG_TAIL_LINES = 25

_S = TypeVar("_S", bound="ServerProcess")


class ServerStartError(RuntimeError):
    """A server could not be found, exited early or did not become ready in time.

    The message names what is missing, or ends with the tail of the server log.
    """


# Servers still running at interpreter exit are stopped, so none outlives a test run.
_LIVE_SERVERS: set[ServerProcess] = set()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_LIVE_SERVERS):
        with contextlib.suppress(Exception):
            server.stop()


class ServerProcess:
    """One server process on loopback ports, with its working directory and log.

    Args:
        ports: the ports to bind; None: `port_count` free ones, chosen again on a clash. Given
            ports are not retried: a clash is a start error.
        start_timeout_s: upper bound for `start`, in seconds (all attempts together).
        stop_timeout_s: how long `stop` waits after SIGTERM before SIGKILL, in seconds.
        workdir: where the log (and what the subclass puts there) goes. Default: a fresh
            temporary directory, removed by `stop` unless ``keep_workdir``. A given
            ``workdir`` is never removed.
        keep_workdir: keep the temporary directory (and so the log) after `stop`.
    """

    # A subclass sets its name in messages, the error `start` raises, how many ports it binds,
    # its log's file name, a temporary working directory's prefix, the readiness poll interval.
    process_name: ClassVar[str] = "server"
    start_error: ClassVar[type[ServerStartError]] = ServerStartError
    port_count: ClassVar[int] = 1
    log_name: ClassVar[str] = "server.log"
    workdir_prefix: ClassVar[str] = "fleetwatch-server-"
    poll_interval_s: ClassVar[float] = 0.1

    def __init__(self, *, ports: tuple[int, ...] | None, start_timeout_s: float,
                 stop_timeout_s: float, workdir: str | os.PathLike[str] | None,
                 keep_workdir: bool) -> None:
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._given_workdir = Path(workdir) if workdir is not None else None
        self._keep_workdir = keep_workdir
        self._workdir: Path | None = None
        self._log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._requested_ports = ports
        self._ports: tuple[int, ...] | None = ports
        self._fixed_ports = ports is not None
        self._lock = threading.Lock()
        #: Seconds from spawning the process to readiness (last start).
        self.start_seconds: float | None = None

    # -- hooks -------------------------------------------------------------------------------

    def _preflight(self) -> None:
        """Find what the server needs before anything is created; raise `start_error` if not."""

    def _command(self) -> list[str]:
        """The command line for the current ports and working directory."""
        raise NotImplementedError

    def _environment(self) -> dict[str, str]:
        return dict(os.environ)

    def _wait_ready(self, deadline: float) -> None:
        """Return once the server is ready; raise `start_error` (see `_wait_until`)."""
        raise NotImplementedError

    def _populate_workdir(self, workdir: Path) -> None:
        """Put what the server needs into ``workdir`` (before each spawn)."""

    def _after_terminate(self) -> None:
        """Clean up once the process group is gone (each stop and failed attempt)."""

    def _exit_hint(self) -> str:
        """Appended to the message of a server that exited during start."""
        return ""

    def _summarize_log(self, text: str, lines: int) -> str:
        """The part of the log that a start error shows: its last ``lines`` non-empty lines."""
        return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])

    @property
    def metrics_url(self) -> str:
        """URL of the server's Prometheus exposition."""
        raise NotImplementedError

    # -- state -------------------------------------------------------------------------------

    def _port_at(self, index: int) -> int:
        if self._ports is None:
            raise RuntimeError("the server has not been started")
        return self._ports[index]

    @property
    def log_path(self) -> Path:
        """The file that receives the server's stdout and stderr."""
        if self._log_path is None:
            raise RuntimeError("the server has not been started")
        return self._log_path

    @property
    def pid(self) -> int | None:
        """The server's process id (also its process group id), or None when not started."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code of the last process once it has exited (negative: killed by that
        signal), None while it runs or before a start."""
        return self._process.poll() if self._process is not None else None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self: _S) -> _S:
        """Start the server, wait until it is ready (at most ``start_timeout_s``); return self.

        It tries again on a transient failure (:data:`TRANSIENT_START_FAILURES`: a chosen
        port taken — new ones are chosen — or Triton's shared-memory race), up to three
        attempts in all, within the same time bound.

        Raises:
            ServerStartError: (the subclass's `start_error`) something the server needs is
                missing, the server exited, or it was not ready in time; the message carries
                the log tail, and the processes are stopped first.
            RuntimeError: the server is already running.
        """
        with self._lock:
            if self.running:
                raise RuntimeError("the server is already running")
            self._preflight()
            self._prepare_workdir()
            deadline = time.monotonic() + self.start_timeout_s
            attempts = 3
            try:
                for attempt in range(attempts):
                    if not self._fixed_ports:
                        self._ports = tuple(free_ports(self.port_count))
                    spawned = time.monotonic()
                    self._spawn()
                    try:
                        self._wait_ready(deadline)
                        self.start_seconds = time.monotonic() - spawned
                        break
                    except ServerStartError:
                        tail = self.log_tail()
                        retry = self._transient_start_failure(tail)
                        self._terminate()
                        if not retry or attempt == attempts - 1 or time.monotonic() >= deadline:
                            raise
            except BaseException:
                self._terminate()
                self._cleanup_workdir()
                raise
            _LIVE_SERVERS.add(self)
            return self

    #: Start-up failures worth one more attempt (lower-case text of the log tail): a port
    #: taken between choosing and binding it; Triton's Python backend aborting on
    #: ``boost::interprocess::lock_exception`` while it sets up shared memory (an upstream
    #: race, triton-inference-server/server#5949, likelier on a busy machine).
    TRANSIENT_START_FAILURES: tuple[str, ...] = ("already in use", "interprocess::lock_exception")

    def _transient_start_failure(self, log_tail: str) -> bool:
        """Whether a failed start is worth another attempt: a taken port only when the ports
        were chosen here (fixed ports stay taken), the Triton shared-memory race always."""
        text = log_tail.lower()
        if "already in use" in text:
            return not self._fixed_ports
        return any(m in text for m in self.TRANSIENT_START_FAILURES[1:])

    def stop(self) -> None:
        """Stop the server: SIGTERM, SIGKILL to its process group after ``stop_timeout_s``
        (and always to what is left of the group), then remove the temporary working
        directory unless it was given or ``keep_workdir``. Idempotent."""
        with self._lock:
            self._terminate()
            self._cleanup_workdir()
            self._ports = self._requested_ports
            self._fixed_ports = self._requested_ports is not None
            _LIVE_SERVERS.discard(self)

    def terminate(self) -> None:
        """Stop the processes but keep the working directory, the log and the ports, so that
        `start` brings the same server back (its counters restart at 0, as after a pod
        restart)."""
        with self._lock:
            self._terminate()
            self._fixed_ports = self._ports is not None
            _LIVE_SERVERS.discard(self)

    def restart(self: _S) -> _S:
        """`terminate` and `start` again on the same ports."""
        self.terminate()
        return self.start()

    def _prepare_workdir(self) -> None:
        if self._workdir is None:
            if self._given_workdir is not None:
                workdir = self._given_workdir.resolve()
                workdir.mkdir(parents=True, exist_ok=True)
            else:
                workdir = Path(tempfile.mkdtemp(prefix=self.workdir_prefix))
            self._workdir = workdir
            self._log_path = workdir / self.log_name
        self._populate_workdir(self._workdir)

    def _cleanup_workdir(self) -> None:
        if self._workdir is not None and self._given_workdir is None and not self._keep_workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
            self._log_path = None

    def _spawn(self) -> None:
        command = self._command()
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(command) + "\n").encode())
            log.flush()
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                cwd=self._workdir,
                # Own session and process group: a terminal's Ctrl-C does not reach it, and a
                # stop can kill the server together with the processes it started.
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
        # What the server started is in the same group: whatever is left goes (also when the
        # server died on its own and left its children running).
        kill_group(process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        wait_group_gone(process.pid, timeout_s=10.0)
        self._after_terminate()

    def _wait_until(self, ready: Callable[[], bool], deadline: float, *,
                    before: Callable[[], str], late: Callable[[], str]) -> None:
        """Poll ``ready()`` until it is true and the server's own process group listens on
        its ports (an answer from another process that took a chosen port is not the server
        being ready: it then fails to bind and is retried on new ports).

        Raises:
            ServerStartError: (`start_error`) the process exited first ("… exited with code N
                before ``before()``"), or ``deadline`` passed (the message ``late()``); both end
                with the log tail.
        """
        while True:
            if self._process is None or self._process.poll() is not None:
                code = self._process.returncode if self._process is not None else None
                raise self.start_error(
                    f"{self.process_name} exited with code {code} before {before()}"
                    f"{self._exit_hint()}; {self.process_name} log:\n{self.log_tail()}"
                )
            if ready() and self._owns_ports():
                return
            if time.monotonic() >= deadline:
                raise self.start_error(f"{late()}; {self.process_name} log:\n{self.log_tail()}")
            time.sleep(self.poll_interval_s)

    def _owns_ports(self) -> bool:
        """Whether this server's process group listens on all its ports (True when the
        platform cannot say: see :func:`fleetwatch.demo.procs.group_listens`)."""
        if self._process is None or self._ports is None:
            return False
        return group_listens(self._process.pid, self._ports) is not False

    # -- observation -------------------------------------------------------------------------

    def metrics_text(self, timeout_s: float = 5.0) -> str:
        """GET `metrics_url` and return the Prometheus text exposition (format 0.0.4).

        Raises:
            urllib.error.URLError: the metrics endpoint did not answer.
        """
        request = urllib.request.Request(self.metrics_url,
                                         headers={"Accept": "text/plain; version=0.0.4"})
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return bytes(response.read()).decode("utf-8")

    def log_text(self) -> str:
        """The whole server log ("" when there is none or it cannot be read)."""
        if self._log_path is None:
            return ""
        try:
            return self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log ("" if there is none)."""
        return self._summarize_log(self.log_text(), lines)
