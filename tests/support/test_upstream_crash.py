"""`on_a_server_that_stays_up`: the scenario runs again only after a crash report, and
the crash is reported, never hidden."""

from __future__ import annotations

import pytest

from tests.support.upstream_crash import UpstreamCrashWarning, on_a_server_that_stays_up


class ServerDouble:
    """A test double of a started `ServerProcess` (the members the helper reads): whether
    it is still running after the scenario, and its log. A real Triton crashes on no
    demand, so the crash is scripted: ``fates`` gives each successive server's fate."""

    def __init__(self, fate: str) -> None:
        self.fate = fate  # "up", "crash" (a crash report in its log), "exit" (clean)
        self.running = True
        self.returncode: int | None = None

    def __enter__(self) -> ServerDouble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.running = False

    def end_scenario(self) -> None:
        if self.fate != "up":
            self.running = False
            self.returncode = -6 if self.fate == "crash" else 0

    def log_text(self) -> str:
        if self.fate == "crash":
            return ("I1206 ready\nterminate called after throwing an instance of "
                    "'boost::interprocess::lock_exception'\n")
        return "I1206 ready\nI1206 exiting\n"


def _run(fates: list[str]) -> tuple[list[int], object]:
    servers = iter([ServerDouble(f) for f in fates])
    runs: list[int] = []

    def scenario(server: ServerDouble) -> int:
        runs.append(len(runs) + 1)
        server.end_scenario()
        return len(runs)

    return runs, on_a_server_that_stays_up(lambda: next(servers), scenario)


def test_a_server_that_stays_up_runs_the_scenario_once():
    runs, result = _run(["up", "up"])
    assert runs == [1] and result == 1


def test_a_crash_runs_the_scenario_again_on_a_fresh_server_and_says_so(capsys):
    with pytest.warns(UpstreamCrashWarning, match="lock_exception"):
        runs, result = _run(["crash", "up"])
    assert runs == [1, 2] and result == 2
    assert "crashed (exit code -6) during attempt 1 of 2" in capsys.readouterr().out


def test_a_crash_on_every_attempt_fails():
    with pytest.warns(UpstreamCrashWarning), pytest.raises(pytest.fail.Exception,
                                                           match="each of 2 attempts"):
        _run(["crash", "crash", "up"])


def test_a_clean_exit_is_not_retried():
    with pytest.raises(pytest.fail.Exception, match="without a crash report"):
        _run(["exit", "up"])
