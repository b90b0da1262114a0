"""`fleetwatch.demo.supervise.Supervisor` on a real Triton: a server that dies (here:
SIGKILL, as the kernel ends a crashed process) is restarted on the same ports and serves
again, with its exit recorded; past the restart budget it is given up on, and the demo's
summary names both."""

from __future__ import annotations

import os
import signal
import time

import pytest

from fleetwatch.demo.run import summary_lines
from fleetwatch.demo.supervise import Exit, Supervisor, crash_excerpt
from fleetwatch.demo.triton import TritonServer

pytestmark = pytest.mark.triton


def _kill(server: TritonServer) -> None:
    assert server.pid is not None
    os.killpg(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.running


def test_a_killed_triton_is_restarted_on_its_ports_then_given_up_past_the_budget():
    seen: list[Exit] = []
    with TritonServer() as triton:
        ports = (triton.http_address, triton.grpc_address, triton.metrics_url)
        supervisor = Supervisor({"Triton": triton}, max_restarts=1, backoff_s=0.1,
                                on_exit=seen.append)
        assert supervisor.poll() == []  # a running server is left alone
        _kill(triton)
        (first,) = supervisor.poll()
        assert first.server == "Triton" and first.returncode == -signal.SIGKILL
        assert first.restarted and first.error is None
        assert first.log_tail  # the dead server's log, kept before the restart
        assert triton.running
        assert (triton.http_address, triton.grpc_address, triton.metrics_url) == ports
        assert "nv_inference_count" in triton.metrics_text()  # it serves again
        assert supervisor.restarts("Triton") == 1

        _kill(triton)
        (second,) = supervisor.poll()
        assert not second.restarted and "limit" in (second.error or "")
        assert not triton.running
        assert supervisor.given_up() == ["Triton"]
        assert supervisor.poll() == []  # given up: not tried again
        assert seen == [first, second]
        line = summary_lines({}, {"Triton": triton}, supervisor.exits)[-1]
        assert line == (f"  servers: Triton DIED during the demo (restarted 1×: exit -9 at "
                        f"{first.at_s:.0f} s; exit -9 at {second.at_s:.0f} s)")


class ExitedServerDouble:
    """A test double of an exited `ServerProcess` (the members the supervisor
    reads), for the paths a real server does not take on demand: a restart that fails."""

    running = False
    returncode = -6

    def __init__(self, restart_error: Exception | None = None) -> None:
        self.restart_error = restart_error
        self.restarts = 0

    def log_text(self) -> str:
        return "terminate called after throwing boost::interprocess::lock_exception\n"

    def restart(self) -> None:
        self.restarts += 1
        if self.restart_error is not None:
            raise self.restart_error


def test_a_supervisor_stopped_during_the_back_off_does_not_restart():
    server = ExitedServerDouble()
    supervisor = Supervisor({"x": server}, backoff_s=30, poll_s=0.01)  # type: ignore[dict-item]
    supervisor.start()
    time.sleep(0.3)  # polled every 10 ms: it has seen the exit and waits out the back-off
    t0 = time.monotonic()
    supervisor.stop(timeout_s=10)
    assert time.monotonic() - t0 < 20  # not the 30-s back-off
    assert server.restarts == 0
    (record,) = supervisor.exits
    assert record.error == "the demo was stopping" and not record.restarted


def test_a_failed_restart_is_recorded_and_given_up_on():
    server = ExitedServerDouble(RuntimeError("port 8000 taken\nmore"))
    supervisor = Supervisor({"x": server}, backoff_s=0)  # type: ignore[dict-item]
    (record,) = supervisor.poll()
    assert record.error == "RuntimeError: port 8000 taken" and record.returncode == -6
    assert "lock_exception" in record.log_tail
    assert supervisor.given_up() == ["x"] and supervisor.poll() == []


def test_the_crash_excerpt_starts_at_the_last_crash_report():
    errors = [f"E1201 18:48:{i:02d} pb_stub.cc:714] faulty: negative input" for i in range(40)]
    frames = [f"{i}# 0x00007FAF9B33B50C in libtriton_python.so" for i in range(19)]
    text = "\n".join([*errors, "Signal (11) received.", *frames, "",
                      "I1201 pb_stub.cc:2145]  Non-graceful termination detected."])
    lines = crash_excerpt(text, lines=5).splitlines()
    assert lines == ["Signal (11) received.", *frames[:4], "…",
                     "I1201 pb_stub.cc:2145]  Non-graceful termination detected."]
    abort = "terminate called after throwing an instance of 'lock_exception'\n  what():  x\n"
    assert crash_excerpt(abort + "Signal (6) received.\n0# a\n").splitlines()[0] == (
        "terminate called after throwing an instance of 'lock_exception'")
    assert crash_excerpt("\n".join(errors), lines=3).splitlines() == errors[-3:]


def test_a_server_that_stayed_up_long_enough_starts_a_new_row_of_restarts():
    server = ExitedServerDouble()
    supervisor = Supervisor({"x": server}, max_restarts=2, backoff_s=0,  # type: ignore[dict-item]
                            reset_after_s=0.2)
    assert [e.restarted for e in supervisor.poll() + supervisor.poll()] == [True, True]
    time.sleep(0.3)  # up for longer than reset_after_s since the last restart
    assert [e.restarted for e in supervisor.poll() + supervisor.poll()] == [True, True]
    (third,) = supervisor.poll()  # the third exit in a row is one too many
    assert third.error == "restarted 2 times already (the limit)"
    assert server.restarts == 4 and supervisor.given_up() == ["x"]


@pytest.mark.parametrize("kwargs", [{"max_restarts": -1}, {"backoff_s": -1}, {"poll_s": 0},
                                    {"reset_after_s": 0}])
def test_bad_bounds_are_a_value_error(kwargs):
    with pytest.raises(ValueError, match="must be"):
        Supervisor({}, **kwargs)
