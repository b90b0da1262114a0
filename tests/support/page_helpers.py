"""Helpers of the status-page tests (and ``benchmarks/bench_page.py``): a simulated vLLM
fleet and upstream (test input), the sidecar's app wired as ``run_sidecar`` wires it, a
DOM reader, headless Chromium (Debian's ``chromium``) and a Prometheus test double."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from aiohttp import web

#: A model name that is hostile HTML.
EVIL = "evil<script>alert(1)</script>&amp;"
#: SLOs of the page tests: TTFT within 100 ms, availability; short windows.
SLOS = {
    "windows": [{"long": "1m", "short": "10s", "budget_consumed": 0.05},
                {"long": "10m", "short": "1m", "budget_consumed": 0.1}],
    "capacity": {"window": "10m", "min_events": 20, "hysteresis_updates": 1},
    "slos": [
        {"name": "ttft", "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.1}},
         "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
         "concurrency": {"envelope": 4, "bands": [1, 2, 4, 8, 16]}},
        {"name": "availability", "sli": {"availability": {}},
         "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
         "concurrency": {"envelope": 8}},
    ],
}
#: Registry of the page tests; the evil model's entry has hostile fields too.
REGISTRY = {"models": [
    {"name": "tiny-llm", "team": "genai", "owner": "bob@example.com", "oncall": "genai-oncall",
     "latency_tier": "streaming"},
    {"name": "evil*", "team": "<img src=x onerror=alert(2)>", "owner": "mallory\u202e",
     "oncall": "\"><b>x</b>", "latency_tier": "batch"},
]}


class VLLMSim:
    """Test input: cumulative vLLM 0.32 counters of ``models``; every :meth:`exposition`
    is one more step in which each model runs 1, 2, 3, 6 or 12 requests (in turn) and
    answers 40, all first tokens fast up to ``knee`` concurrent requests, half slow above."""

    def __init__(self, models: list[str], knee: float = 4.0) -> None:
        self.models, self.knee, self.k = models, knee, 0
        self.cum = {m: [0.0, 0.0] for m in models}  # fast, slow

    def exposition(self) -> str:
        self.k += 1
        lines = []
        for i, m in enumerate(self.models):
            running = (1, 2, 3, 6, 12)[(self.k + i) % 5]
            slow = 20 if running > self.knee else 0
            self.cum[m][0] += 40 - slow
            self.cum[m][1] += slow
            fast, late = self.cum[m]
            lab = f'model_name="{m}",engine="0"'
            lines += [f"vllm:num_requests_running{{{lab}}} {running}",
                      f"vllm:num_requests_waiting{{{lab}}} 0",
                      f"vllm:kv_cache_usage_perc{{{lab}}} {0.1 * running / 4}"]
            for le, v in (("0.05", fast / 2), ("0.1", fast), ("0.5", fast + late),
                          ("+Inf", fast + late)):
                lines.append(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {v}')
            lines += [f"vllm:time_to_first_token_seconds_count{{{lab}}} {fast + late}",
                      f"vllm:time_to_first_token_seconds_sum{{{lab}}} {0.05 * fast + 0.3 * late}",
                      f'vllm:request_success_total{{{lab},finished_reason="stop"}} '
                      f"{fast + late}"]
        return "\n".join(lines) + "\n"


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """``app`` on a free loopback port; yields its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def upstream_app(body: Callable[[], str]) -> web.Application:
    """Test double: a vLLM whose /metrics answers ``body()`` (one call per request) and
    whose /health answers 200."""
    async def metrics(_r: web.Request) -> web.Response:
        return web.Response(text=body(), content_type="text/plain")

    async def health(_r: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    return app


def wire(scraper: Any, slos: dict, history: Any = None, page: bool = True) -> web.Application:
    """The sidecar's app around a started ``Scraper`` as ``run_sidecar`` wires it: the SLO
    engine subscribed, ``/slo`` and ``/autoscaling``, and (``page``) ``/`` with ``history``
    (a ``SignalHistory``; the route's default when None)."""
    from fleetwatch.sidecar.page_route import page_routes
    from fleetwatch.sidecar.server import make_app, slo_routes
    from fleetwatch.slo.engine import SLOEngine
    from fleetwatch.slo.spec import parse_slo_file

    engine = SLOEngine(parse_slo_file(slos), scraper.registry)
    scraper.subscribers.append(engine.update)
    routes, extra = slo_routes(engine)
    if page:
        routes = {**routes, **page_routes(scraper, engine, routes, history)}
    return make_app(scraper, routes, extra)


class Node:
    """One element of a parsed document."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Every descendant with ``tag`` and the given attributes (``class_`` for class,
        ``data_x`` for ``data-x``; ``class`` matches one of the element's classes)."""
        found = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and all(
                        _attr_matches(c, k, v) for k, v in attrs.items()):
                    found.append(c)
                found += c.iter(tag, **attrs)
        return found


def _attr_matches(node: Node, key: str, value: str) -> bool:
    name = key.rstrip("_").replace("_", "-")
    if name == "class":
        return value in node.attrs.get("class", "").split()
    return node.attrs.get(name) == value


class _Builder(HTMLParser):
    VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "embed",
                      "source", "track", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#document", {}, None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data: str) -> None:
        self.cur.children.append(data)


def parse_dom(html: str) -> Node:
    """The document tree of ``html`` (lenient, like a browser's for well-formed input)."""
    b = _Builder()
    b.feed(html)
    b.close()
    return b.root


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars")


def chromium() -> str:
    """The path of Debian's ``chromium``: a test failure under ``CI=true`` when missing
    (``./dev test`` installs it), a skip elsewhere."""
    import pytest

    path = shutil.which("chromium")
    if path is None:
        msg = "chromium not found: install Debian's chromium (./dev test does)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {msg}")
        pytest.skip(msg)
    return path


def load_page(url: str, shot: Path, size: str = "1280,2600", timeout: float = 60.0) -> str:
    """Load ``url`` in headless Chromium with a fresh profile: write a PNG screenshot to
    ``shot`` and return the DOM as Chromium has it (one run: ``--dump-dom`` and
    ``--screenshot`` together)."""
    with tempfile.TemporaryDirectory(prefix="fw-chromium-") as profile:
        res = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                              "--dump-dom", f"--screenshot={shot}", f"--window-size={size}",
                              url], capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"no PNG at {shot}"
    return res.stdout


class PrometheusDouble:
    """Test double of Prometheus' instant-query API (``/api/v1/query``) over fixed
    samples ``(name, labels, value)``: a query is a metric name, optionally ``== 1``
    (what ``fleetwatch slo report`` sends). Serves from a thread; use as a context."""

    def __init__(self, samples: list[tuple[str, dict[str, str], float]]) -> None:
        self.samples = samples
        self.queries: list[str] = []
        self.url = ""

    def answer(self, promql: str) -> list[dict]:
        self.queries.append(promql)
        name, _, cond = promql.partition("==")
        return [{"metric": {"__name__": n, **lab}, "value": [1.7e9, repr(v)]}
                for n, lab, v in self.samples
                if n == name.strip() and (not cond or v == float(cond))]

    def __enter__(self) -> PrometheusDouble:
        import json
        import threading
        import urllib.parse
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                body = json.dumps({"status": "success", "data": {
                    "resultType": "vector", "result": double.answer(q["query"][0])}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
