"""The small hostile findings, each through the CLI or a running ``fleetwatch serve``:
a NUL in a label value, an empty file, a wrong ``--source``, ``demo`` on a taken port,
readiness log lines that say what happened, unmapped families named, unregistered models
named."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from tests.support.helpers import wait_until
from tests.support.hostile import _MAIN, Sidecar, Upstream, cli

VLLM = ('# TYPE vllm:num_requests_running gauge\n'
        'vllm:num_requests_running{model_name="llm"} 1\n'
        '# TYPE my_unmapped_family gauge\n'
        'my_unmapped_family 1\n')


def test_a_nul_in_a_label_value_is_one_skipped_line_in_normalize_and_serve(tmp_path):
    body = ('nv_inference_count{model="a\x00b",version="1"} 1\n'
            'nv_inference_count{model="m",version="1"} 2\n')
    f = tmp_path / "nul.prom"
    f.write_text(body)
    res = cli("normalize", "--source", "triton", str(f))
    assert res.returncode == 0, res.stderr
    assert 'model="m"' in res.stdout and "\x00" not in res.stdout
    assert "skipped_lines=1" in res.stderr
    with Upstream(lambda _n: body) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.3, "timeout_seconds": 0.3},
             "targets": [{"name": "t", "kind": "triton", "url": up.url}]}) as sc:
        # a starved machine may take longer than one interval per scrape: wait for the
        # outcome, not for a fixed time
        def good_line_served() -> str:
            body = sc.get("/metrics")[1]
            return body if 'model="m"' in body else ""

        metrics = wait_until(good_line_served, "the good line on /metrics", 60)
        assert "\x00" not in metrics
        assert sc.metric("fleetwatch_upstream_invalid_lines_total", target="t") >= 1


def test_an_empty_file_is_called_empty(tmp_path):
    f = tmp_path / "empty.prom"
    f.write_text("\n  \n")
    res = cli("normalize", str(f))
    assert res.returncode == 2
    assert "empty" in res.stderr and "no mapping" not in res.stderr


def test_an_exposition_no_source_maps_is_an_error_unless_passed_through(tmp_path):
    # e.g. the sidecar's own /metrics fed back to it: nothing out
    f = tmp_path / "own.prom"
    f.write_text("# TYPE modelserver_requests_total counter\n"
                 'modelserver_requests_total{model="m",outcome="success"} 3\n')
    res = cli("normalize", str(f))
    assert res.returncode == 2, res.stderr
    assert "no mapping for this server's metrics" in res.stderr
    res = cli("normalize", "--passthrough", str(f))
    assert res.returncode == 0, res.stderr
    assert 'modelserver_requests_total{model="m",outcome="success"} 3' in res.stdout


def test_a_wrong_source_is_an_error_that_names_the_right_one(tmp_path):
    f = tmp_path / "vllm.prom"
    f.write_text(VLLM)
    res = cli("normalize", "--source", "dcgm", str(f))
    assert res.returncode == 2 and res.stdout.strip() == ""
    assert "no dcgm series" in res.stderr and "--source vllm" in res.stderr


def test_demo_on_a_taken_port_says_so_in_one_line_before_starting_anything():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-c", _MAIN, "demo", "--port", str(port),
                                 "--duration", "5"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:  # it started Triton: stop the whole group
            os.killpg(proc.pid, signal.SIGKILL)
            _out, err = proc.communicate()
            raise AssertionError(f"demo did not stop at once:\n{err[-2000:]}") from None
    assert proc.returncode == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0]


def _wait_for_log(sc, *texts: str) -> None:
    """Until one line of the sidecar's log holds every one of ``texts`` (up to 60 s: a busy
    machine stretches 0.3 s scrape intervals, and may time a scrape out: a line about
    that must not stand for the line awaited)."""
    wait_until(lambda: any(all(t in line for t in texts) for line in sc.log().splitlines()),
               f"a log line with {' and '.join(map(repr, texts))}", 60)


def test_readiness_unmapped_and_unregistered_are_named_in_the_log():
    registry = {"models": [{"name": "known", "team": "t", "owner": "o@example.com",
                            "oncall": "x"}]}
    with Upstream(lambda _n: VLLM) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.3, "timeout_seconds": 0.3},
             "targets": [{"name": "v", "kind": "vllm", "url": up.url}]},
            registry=registry) as sc:
        up.health_status = 500
        up.wait_requests(3)
        _wait_for_log(sc, "not ready", "HTTP 500")
        up.health_status = 200
        _wait_for_log(sc, "ready again")  # one line per change: back to ready first
        up.health_status = None  # hangs: the probe times out
        _wait_for_log(sc, "not ready", "timeout")
        log = sc.log()
    not_ready = [line for line in log.splitlines() if "not ready" in line]
    assert any("HTTP 500" in line for line in not_ready), log
    assert any("timeout" in line for line in not_ready), log
    assert any("my_unmapped_family" in line and "not mapped" in line
               for line in log.splitlines()), log
    assert any("llm" in line and "no registry entry" in line for line in log.splitlines()), log
