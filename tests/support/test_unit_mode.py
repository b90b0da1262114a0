"""The unit mode's guard (`tests.support.unit_mode`): a test outside tests/e2e/ that starts
an engine or a server, or is marked as needing one, fails in ``pytest --unit``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support import unit_mode
from tests.support.helpers import ROOT
from tests.support.unit_mode import refused


@pytest.mark.parametrize("argv", [
    ["prometheus", "--config.file=p.yml"], ["/usr/bin/alertmanager"], ["victoria-metrics"],
    ["vmalert", "-rule=x"], ["vmagent"], ["chromium", "--headless"],
    ["/x/pytriton/tritonserver/bin/tritonserver", "--model-repository=m"],
    ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
    "prometheus --version",
])
def test_servers_and_engines_are_refused(argv):
    assert refused(argv)


@pytest.mark.parametrize("argv", [
    ["promtool", "check", "rules", "r.yml"], ["amtool", "check-config", "a.yml"],
    [sys.executable, "-c", "print(1)"], ["fleetwatch", "serve", "--config", "c.yaml"], [],
    # the tests' own interpreter has no vllm: the harness's error path, not an engine
    [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
])
def test_tools_and_the_sidecar_are_allowed(argv):
    assert refused(argv) is None


def test_a_unit_run_fails_a_test_that_starts_a_server_or_is_marked_for_an_engine(tmp_path):
    (tmp_path / "test_sneaky.py").write_text(textwrap.dedent("""
        import subprocess, sys

        import pytest

        def test_starts_prometheus():
            subprocess.run(["prometheus", "--version"], capture_output=True)

        def test_starts_vllm():
            subprocess.run(["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"])

        @pytest.mark.triton
        def test_marked_triton():
            pass

        def test_plain():
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    """))
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--unit", "-W", "ignore::pytest.PytestUnknownMarkWarning", "--rootdir", str(tmp_path),
         str(tmp_path / "test_sneaky.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)  # a hang guard
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "3 failed, 1 passed" in out or "2 failed, 1 passed, 1 error" in out, out
    assert "prometheus is a server" in out and "vLLM's API server is an engine" in out, out
    assert "is marked triton" in out, out


def test_hypothesis_examples_are_the_full_count_outside_the_unit_run(monkeypatch):
    monkeypatch.setattr(unit_mode, "_unit_run", False)
    assert [unit_mode.examples(n) for n in (10, 60, 150, 300)] == [10, 60, 150, 300]
    monkeypatch.setattr(unit_mode, "_unit_run", True)
    assert [unit_mode.examples(n) for n in (10, 60, 150, 300)] == [10, 20, 30, 60]
