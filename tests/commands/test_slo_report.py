"""``fleetwatch slo report`` against a Prometheus that misbehaves. ``FakePrometheus`` is a
test double (fault injection, loopback only): a tiny aiohttp server speaking just enough of
the Prometheus HTTP API (``/api/v1/query``) to answer malformed: HTTP errors with and
without Prometheus' JSON error, bodies that are not JSON, not an API answer or not a vector,
``status: error``, bodies cut short or trickling in, NaN/±Inf and non-numeric values,
samples without labels, labels with rich markup and terminal escapes.

Outcomes, as the README says: a report (exit 0) for odd data, one ``fleetwatch: error:``
line and exit 1 for a Prometheus that cannot answer, exit 2 for a bad ``--prometheus``
URL or ``--timeout``; never a traceback, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from aiohttp import web

SLO = {"slo": "llm-ttft", "model": "m", "model_version": "1", "backend": "vllm",
       "instance": "s:9810"}


def _vector(samples: list[dict]) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": samples}}


def _sample(value: object, **labels: object) -> dict:
    return {"metric": {**SLO, **labels}, "value": [1700000000.0, value]}


#: A well-formed answer per query of the report.
GOOD = {
    "fleetwatch_slo_state == 1": [_sample("1", state="ok")],
    "fleetwatch_slo_error_budget_remaining_ratio": [_sample("0.5")],
    "fleetwatch_slo_capacity_concurrency": [_sample("8")],
    "fleetwatch_slo_burn_rate": [_sample("0.5", window="1h", band="all"),
                                 _sample("2", window="1h", band="4")],
    "fleetwatch_slo_concurrency": [{"metric": {k: v for k, v in SLO.items() if k != "slo"},
                                    "value": [1700000000.0, "3"]}],
}

MARKUP = "[/]\x1b[2J[bold red]pwned"
#: Odd but well-formed answers: the report must still come out.
ODD = {
    "fleetwatch_slo_state == 1": [_sample("1", state="ok"), _sample("1", model="no-state"),
                                  _sample("1", state="regression", model=MARKUP),
                                  _sample("1", state="ok", model=7)],
    "fleetwatch_slo_error_budget_remaining_ratio": [_sample("NaN"), _sample("+Inf",
                                                                            model=MARKUP)],
    "fleetwatch_slo_capacity_concurrency": [_sample("-Inf"), _sample("abc", model=7),
                                            {"metric": SLO}, {"value": [1, "1"]}, "junk",
                                            {"metric": {**SLO, "model": "v"}, "value": "1"}],
    "fleetwatch_slo_burn_rate": [_sample("1e999", window="1h", band="all"),
                                 _sample("2", window="1h"), _sample("2", band="4"),
                                 _sample("3", window="not-a-duration", band="all"),
                                 _sample(None, window="5m", band="all")],
    "fleetwatch_slo_concurrency": [{"metric": {"model": "m"}, "value": [1, "NaN"]}],
}


class FakePrometheus:
    """Test double (fault injection): ``/api/v1/query`` answers as ``mode`` says."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        q = request.query.get("query", "")
        mode = self.mode
        if mode in ("ok", "odd"):
            return web.json_response(_vector((GOOD if mode == "ok" else ODD).get(q, [])))
        if mode == "http500":
            return web.Response(status=500, text="internal error")
        if mode == "http400json":
            return web.json_response({"status": "error", "errorType": "bad_data",
                                      "error": "parse error:\n\x1b[31munexpected"}, status=400)
        if mode == "http503empty":
            return web.Response(status=503)
        if mode == "notjson":
            return web.Response(text="<html><body>login</body></html>", content_type="text/html")
        if mode == "list":
            return web.json_response([])
        if mode == "error":
            return web.json_response({"status": "error", "errorType": "execution",
                                      "error": "query timed out in expression evaluation"})
        if mode == "nodata":
            return web.json_response({"status": "success"})
        if mode == "matrix":
            return web.json_response({"status": "success", "data": {
                "resultType": "matrix", "result": [{"metric": SLO, "values": [[1, "1"]]}]}})
        if mode == "scalar":
            return web.json_response({"status": "success", "data": {
                "resultType": "scalar", "result": [1, "1"]}})
        if mode == "deep":
            return web.Response(text="[" * 200_000, content_type="application/json")
        if mode == "ftp-redirect":
            raise web.HTTPFound("ftp://127.0.0.1:1/api/v1/query")
        if mode == "notutf8":
            return web.Response(body=b"\xff\xfe{}", content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if mode == "cut":  # promises 1000 bytes, sends 10 and hangs up
            resp.content_length = 1000
            await resp.prepare(request)
            await resp.write(b'{"status":')
            request.transport.close()
            return resp
        if mode == "trickle":  # a byte every 0.2 s: each read is in time, the whole is not
            await resp.prepare(request)
            with contextlib.suppress(ConnectionResetError):  # the client gave up: good
                for c in json.dumps(_vector([])).encode() * 3:
                    await resp.write(bytes([c]))
                    await asyncio.sleep(0.2)
            return resp
        raise AssertionError(mode)

    def __enter__(self) -> FakePrometheus:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_get("/api/v1/query", self.handle)
            self._runner = web.AppRunner(app)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        assert ready.wait(10), "fake Prometheus did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def prom():
    with FakePrometheus() as p:
        yield p


def report(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetwatch.cli", "slo", "report", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": str(columns)})


def one_error_line(res: subprocess.CompletedProcess, code: int) -> str:
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetwatch: error: "), res.stderr
    assert "\x1b" not in res.stderr
    return lines[0]


def test_a_well_behaved_prometheus_gives_the_report(prom):
    prom.mode = "ok"
    res = report("--prometheus", prom.url, "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)
    assert row["state"] == "ok" and row["budget_remaining"] == 0.5 and row["concurrency"] == 3
    assert row["burn_rates"] == {"1h": {"all": 0.5, "4": 2.0}}


@pytest.mark.parametrize(("mode", "says"), [
    ("http500", "answered HTTP 500 Internal Server Error"),
    ("http400json", "answered HTTP 400 Bad Request: bad_data: parse error: \\x1b[31munexpected"),
    ("http503empty", "answered HTTP 503"),
    ("notjson", "with something that is not JSON: <html>"),
    ("list", "with JSON that is not a Prometheus API answer"),
    ("error", "with status 'error': execution: query timed out in expression evaluation"),
    ("nodata", "without an instant vector (resultType None)"),
    ("matrix", "without an instant vector (resultType 'matrix')"),
    ("scalar", "without an instant vector (resultType 'scalar')"),
    ("deep", "not JSON"),
    ("notutf8", "not JSON"),
    ("cut", "the answer was cut short (990 bytes missing)"),
    ("ftp-redirect", "answered HTTP 302 redirect to ftp://127.0.0.1:1/api/v1/query refused"),
])
def test_a_prometheus_that_cannot_answer_is_one_error_line_and_exit_1(prom, mode, says):
    """A JSON list, no ``data``, a scalar or matrix answer, 200 000 nested brackets or a
    body cut short once gave tracebacks (AttributeError, KeyError, TypeError,
    RecursionError, IncompleteRead); Prometheus' own error now comes with the HTTP status,
    and the error line says what was wrong rather than a bare JSON decoder message."""
    prom.mode = mode
    for args in ((), ("--json",)):
        line = one_error_line(report("--prometheus", prom.url, *args), 1)
        assert says in line, line


def test_an_answer_trickling_in_is_bounded_by_the_timeout(prom):
    """``--timeout`` bounded each socket read only: a Prometheus sending a byte every 0.2 s
    held the report for as long as it liked (here ~40 s for 1 s of timeout)."""
    prom.mode = "trickle"
    start = time.monotonic()
    line = one_error_line(report("--prometheus", prom.url, "--timeout", "1"), 1)
    assert time.monotonic() - start < 20  # the trickle alone lasts ~40 s
    assert "timed out" in line


def test_odd_values_and_labels_still_give_a_report(prom):
    """±Inf values were printed as ``Infinity``/``-Infinity`` (not JSON), a sample without
    ``state``, ``window`` or ``band`` raised KeyError, a non-string label value TypeError
    (sorting), a value that is not a number ValueError, a window label that is not a
    duration ValueError (table), and a model named ``[/]`` rich's MarkupError; ESC in a label
    went to the terminal as it is."""
    prom.mode = "odd"
    res = report("--prometheus", prom.url, "--json")
    assert res.returncode == 0, res.stderr

    def refuse(c: str) -> None:
        raise AssertionError(f"not JSON: {c}")

    rows = {r["model"]: r for r in json.loads(res.stdout, parse_constant=refuse)}
    assert rows["m"]["state"] == "ok" and rows["m"]["budget_remaining"] is None
    assert rows["m"]["capacity"] is None and rows["m"]["concurrency"] is None
    assert rows["m"]["burn_rates"] == {"1h": {"all": None}, "not-a-duration": {"all": 3.0},
                                       "5m": {"all": None}}
    assert "no-state" not in rows and rows[MARKUP]["state"] == "regression"
    assert rows["7"]["state"] == "ok"
    res = report("--prometheus", prom.url, columns=400)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "\x1b" not in res.stdout and "[/]\\x1b[2J[bold red]pwned" in res.stdout


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_prometheus_is_exit_1():
    line = one_error_line(report("--prometheus", f"http://127.0.0.1:{_closed_port()}"), 1)
    assert "cannot query Prometheus at" in line and "refused" in line


@pytest.mark.parametrize(("args", "says"), [
    (("--prometheus", "127.0.0.1:9090"), "not an http(s) URL with a host"),
    (("--prometheus", "ftp://127.0.0.1/"), "not an http(s) URL with a host"),
    (("--prometheus", "file:///etc/passwd"), "not an http(s) URL with a host"),
    (("--prometheus", "http://"), "not an http(s) URL with a host"),
    (("--prometheus", "http://[::1"), "not a URL"),
    (("--prometheus", "http://127.0.0.1:99999"), "not a URL"),
    (("--prometheus", "http://127.0.0.1:1", "--timeout", "0"), "--timeout 0.0"),
    (("--prometheus", "http://127.0.0.1:1", "--timeout", "-1"), "--timeout -1.0"),
    (("--prometheus", "http://127.0.0.1:1", "--timeout", "nan"), "--timeout nan"),
])
def test_a_bad_url_or_timeout_is_bad_input_exit_2(args, says):
    """These were runtime failures (exit 1, ``cannot query Prometheus``), and a
    ``file://`` URL was opened as a local file."""
    line = one_error_line(report(*args), 2)
    assert says in line, line


def test_report_on_unreachable_prometheus_fails_clearly():
    res = subprocess.run([sys.executable, "-m", "fleetwatch.cli", "slo", "report",
                          "--prometheus", "http://127.0.0.1:9"], capture_output=True, text=True)
    assert res.returncode == 1
    assert "cannot query Prometheus at http://127.0.0.1:9" in res.stderr
