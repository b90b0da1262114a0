"""Per-model facts under faults: the runtime label from Triton's model configuration (a
malformed configuration is not learned), readiness changes logged once per change, the
malformed-lines warning repeated only when the problem changes, and bounded per-model
memory when model names churn.

``FaultTriton`` is a test double (fault injection) of Triton's HTTP endpoints that the
sidecar reads: ``/metrics``, ``/v2/models/<m>/config`` and ``/v2/models/<m>/ready``; a real
Triton cannot be made to serve a malformed model configuration.
"""

from __future__ import annotations

import asyncio
import logging
import re

from aiohttp import web

from fleetwatch.sidecar import scraper as scraper_mod
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.probes import Prober
from fleetwatch.sidecar.scraper import Scraper


class FaultTriton:
    """Test double: Triton's /metrics, model config and model readiness, each settable."""

    def __init__(self, models: list[str]) -> None:
        self.models = models
        self.extra_lines: list[str] = []  # appended to /metrics (e.g. malformed lines)
        self.configs: dict[str, object] = {}  # model → JSON of /v2/models/<m>/config
        self.not_ready: set[str] = set()
        self.config_requests = 0
        self.runner: web.AppRunner | None = None

    def body(self) -> str:
        lines = ["# TYPE nv_inference_request_success counter"]
        lines += [f'nv_inference_request_success{{model="{m}",version="1"}} 3'
                  for m in self.models]
        return "\n".join(lines + self.extra_lines) + "\n"

    async def metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.body(), content_type="text/plain")

    async def config(self, request: web.Request) -> web.Response:
        self.config_requests += 1
        model = request.match_info["model"]
        if model not in self.configs:
            return web.json_response({"error": "unknown model"}, status=404)
        return web.json_response(self.configs[model])

    async def ready(self, request: web.Request) -> web.Response:
        return web.Response(status=400 if request.match_info["model"] in self.not_ready
                            else 200)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/v2/models/{model}/config", self.config)
        app.router.add_get("/v2/models/{model}/ready", self.ready)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()


def _config(base: str, **target):
    return parse_config({"scrape": {"interval_seconds": 5, "timeout_seconds": 4},
                         "targets": [{"name": "t", "kind": "triton", "url": f"{base}/metrics",
                                      "api_url": base, **target}]})


def _runtime_of(scraper: Scraper, model: str) -> str:
    line = next(ln for ln in scraper.body.decode().splitlines()
                if ln.startswith("modelserver_requests_total{") and f'model="{model}"' in ln)
    return line.split('runtime="', 1)[1].split('"', 1)[0]


def _messages(caplog, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


def test_malformed_model_config_is_not_learned_and_logged_once(caplog):
    async def scenario():
        srv = FaultTriton(["nested", "plat", "good", "listy"])
        srv.configs = {"nested": {"backend": {"nested": 1}},
                       "plat": {"platform": ["onnxruntime_onnx"]},
                       "good": {"backend": "python"},
                       "listy": ["backend", "python"]}
        base = await srv.start()
        async with Scraper(_config(base)) as scraper:
            with caplog.at_level(logging.INFO, logger="fleetwatch.scraper"):
                for _ in range(3):
                    await scraper.scrape_once()
                st = scraper.states["t"]
                assert st.runtimes == {"good": "python"}
                assert _runtime_of(scraper, "good") == "python"
                for model in ("nested", "plat", "listy"):
                    assert _runtime_of(scraper, model) == "unknown"
                assert "{'nested': 1}" not in scraper.body.decode()
                warned = _messages(caplog, "cannot read its runtime")
                assert len(warned) == 3  # once per model, not once per scrape
                assert any("model nested:" in w and "'backend' is a dict" in w
                           for w in warned)
                assert not _messages(caplog, "runtime now")

                # the configuration becomes readable: learned, relabelled, logged once
                srv.configs["nested"] = {"backend": "onnxruntime"}
                await scraper.scrape_once()
                await scraper.scrape_once()
                assert _runtime_of(scraper, "nested") == "onnxruntime"
                assert _messages(caplog, "runtime now") == [
                    "target t: model nested: runtime now onnxruntime (was exposed as unknown)"]
        await srv.stop()

    asyncio.run(scenario())


def test_runtime_learned_before_first_exposure_is_not_logged_as_a_change(caplog):
    async def scenario():
        srv = FaultTriton(["a"])
        srv.configs = {"a": {"backend": "python"}}
        base = await srv.start()
        async with Scraper(_config(base)) as scraper:
            with caplog.at_level(logging.INFO, logger="fleetwatch.scraper"):
                await scraper.scrape_once()
                srv.models = ["a", "b"]
                srv.configs["b"] = {"platform": "onnxruntime_onnx"}
                await scraper.scrape_once()
            assert _runtime_of(scraper, "a") == "python"
            assert _runtime_of(scraper, "b") == "onnxruntime"
            assert not _messages(caplog, "runtime now")
        await srv.stop()

    asyncio.run(scenario())


def test_readiness_changes_are_logged_once_per_change(caplog):
    async def scenario():
        srv = FaultTriton(["a", "b"])
        srv.configs = {"a": {"backend": "python"}, "b": {"backend": "python"}}
        base = await srv.start()
        async with Scraper(_config(base, models=["a", "b"])) as scraper:
            with caplog.at_level(logging.INFO, logger="fleetwatch.scraper"):
                await scraper.scrape_once()
                assert not _messages(caplog, "ready")  # ready from the start: nothing to say
                srv.not_ready = {"b"}
                for _ in range(3):
                    await scraper.scrape_once()
                assert scraper.states["t"].models_ready == {"a": True, "b": False}
                # one line, saying what the probe got (an HTTP status, not a timeout)
                (line,) = _messages(caplog, "ready")
                assert re.fullmatch(r"target t: model b not ready \(GET http://127\.0\.0\.1:"
                                    r"\d+/v2/models/b/ready: HTTP 400\)", line), line
                srv.not_ready = set()
                for _ in range(3):
                    await scraper.scrape_once()
                assert _messages(caplog, "ready") == [line, "target t: model b ready again"]
        await srv.stop()

    asyncio.run(scenario())


def test_malformed_lines_warning_repeats_only_when_the_problem_changes(caplog):
    async def scenario():
        srv = FaultTriton(["a"])
        srv.configs = {"a": {"backend": "python"}}
        base = await srv.start()
        bad = 'nv_inference_count{model="a",version="1" 3'
        async with Scraper(_config(base)) as scraper:
            with caplog.at_level(logging.INFO, logger="fleetwatch.scraper"):
                srv.extra_lines = [bad]
                for _ in range(3):
                    await scraper.scrape_once()
                assert len(_messages(caplog, "malformed")) == 1
                srv.extra_lines = [bad, "nv_inference_count"]  # another kind of problem
                for _ in range(3):
                    await scraper.scrape_once()
                assert len(_messages(caplog, "malformed")) == 2
                srv.extra_lines = []
                await scraper.scrape_once()
                await scraper.scrape_once()
                assert _messages(caplog, "malformed")[-1] == \
                    "target t: no malformed lines any more"
                srv.extra_lines = [bad]  # the first problem again: said again
                await scraper.scrape_once()
                assert len(_messages(caplog, "malformed")) == 4
                assert scraper.states["t"].invalid_lines_total == 3 + 6 + 1
        await srv.stop()

    asyncio.run(scenario())


def test_per_model_facts_stay_bounded_when_model_names_churn(monkeypatch):
    forget = 2
    monkeypatch.setattr(scraper_mod, "FORGET_AFTER_SCRAPES", forget, raising=False)
    per_scrape = 3000

    async def runtime(self, probe, base, model):  # the model-config endpoint, without 3000 requests
        return "python", None

    monkeypatch.setattr(Prober, "runtime", runtime)

    async def scenario():
        srv = FaultTriton([])
        base = await srv.start()
        async with Scraper(_config(base)) as scraper:
            st = scraper.states["t"]
            for scrape in range(7):  # unbounded: 21000 runtimes
                srv.models = [f"m{scrape}-{i}" for i in range(per_scrape)]
                await scraper.scrape_once()
                assert st.up and len(st.normalized.models) == per_scrape
                bound = (forget + 1) * per_scrape
                assert len(st.runtimes) <= bound, f"scrape {scrape}: {len(st.runtimes)}"
                assert len(st.models_ready) <= per_scrape
            assert len(st.last_seen) <= bound
            assert not st.exposed_unknown and not st.unreadable_config
            assert f"m6-{per_scrape - 1}" in st.runtimes  # the current ones are known
            assert "m0-0" not in st.runtimes  # long gone: forgotten
        await srv.stop()

    asyncio.run(scenario())


def test_hostile_model_names_stay_one_url_path_segment():
    """A model named like a path ("a/../../v2/repository/index", "x?y#z") must reach
    /v2/models/<name>/config and /ready as one encoded segment (else the test double's
    routes would not match, the runtime would stay unknown and readiness false)."""
    hostile = ["a/../../v2/repository/index", "x?y#z", "sp ace"]

    async def scenario():
        srv = FaultTriton(hostile)
        srv.configs = {m: {"backend": "onnxruntime"} for m in hostile}
        base = await srv.start()
        async with Scraper(_config(base, models=hostile)) as scraper:
            await scraper.scrape_once()
            for m in hostile:
                assert _runtime_of(scraper, m) == "onnxruntime", m
            assert scraper.states["t"].models_ready == {m: True for m in hostile}
        await srv.stop()

    asyncio.run(scenario())
