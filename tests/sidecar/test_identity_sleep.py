"""Configuration identity on ``modelserver_model_info`` and sleep-mode readiness, through
the sidecar's scraper against a small aiohttp upstream (the real engines are in
``test_vllm_real.py`` and ``test_sidecar_triton.py``; the session vLLM server has no sleep
mode, which needs ``--enable-sleep-mode`` and dev-mode endpoints, so the sleeping engine
here is a test double serving the real vLLM 0.32 capture's ``engine_sleep_state``
lines, checked against that capture)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.labels.registry import RegistryError, parse_registry
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import readiness

REGISTRY = parse_registry({"models": [
    {"name": "m", "team": "t", "owner": "o", "oncall": "c", "quantization": "fp8"}]})


#: The real vLLM 0.32 capture whose sleep-state lines the double serves.
REAL_CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "expositions" / "vllm"
                / "v0.32.0-cpu-real-engine-tiny-llm-under-load.prom")
SLEEP_FAMILIES = ("vllm:num_requests_running", "vllm:engine_sleep_state")


def _real_lines(model: str) -> list[str]:
    """The real capture's HELP/TYPE and sample lines of :data:`SLEEP_FAMILIES`, with the
    model renamed to ``model``."""
    lines = [ln for ln in REAL_CAPTURE.read_text().splitlines()
             if any(ln.startswith((f, f"# HELP {f} ", f"# TYPE {f} ")) for f in SLEEP_FAMILIES)]
    return [ln.replace('model_name="tiny-llm"', f'model_name="{model}"') for ln in lines]


def _exposition(awake: int) -> str:
    """The real lines with the sleep state set: ``awake`` 1, or 0 with weights offloaded
    (sleep level 1), as vLLM 0.32 reports ``--enable-sleep-mode`` after ``/sleep``."""
    values = {"awake": awake, "weights_offloaded": 1 - awake, "discard_all": 0}
    out = []
    for ln in _real_lines("m"):
        if ln.startswith("vllm:engine_sleep_state{"):
            state = ln.split('sleep_state="', 1)[1].split('"', 1)[0]
            ln = ln.rsplit(" ", 1)[0] + f" {values[state]}.0"
        elif ln.startswith("vllm:num_requests_running{"):
            ln = ln.rsplit(" ", 1)[0] + " 0.0"
        out.append(ln)
    return "\n".join(out) + "\n"


class SleepModeVLLMDouble:
    """Test double of a vLLM 0.32 server in sleep mode: ``/metrics`` (the real capture's
    lines, :func:`_exposition`), ``/health`` (200, as vLLM answers while asleep) and
    ``/version`` (settable, to produce unreadable answers)."""

    def __init__(self) -> None:
        self.awake = 1
        self.version: object = {"version": "0.32.0"}
        self.version_calls = 0
        self.runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        app.router.add_get("/version", self._version)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=_exposition(self.awake))

    async def _health(self, _request: web.Request) -> web.Response:
        return web.Response()

    async def _version(self, _request: web.Request) -> web.Response:
        self.version_calls += 1
        return web.json_response(self.version)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@contextlib.asynccontextmanager
async def scraping(double: SleepModeVLLMDouble) -> AsyncIterator[Scraper]:
    """Start the double, yield a sidecar scraper of it, stop both."""
    base = await double.start()
    try:
        async with Scraper(_cfg(base), REGISTRY) as scraper:  # type: ignore[arg-type]
            yield scraper
    finally:
        await double.stop()


def test_the_double_serves_the_real_capture_lines():
    """Awake, the double's body is the real vLLM 0.32 lines (only the model renamed and
    the running gauge zeroed); asleep, only the three sleep-state values change."""
    real = _real_lines("m")
    assert len(real) == 2 * 2 + 1 + 3  # HELP+TYPE of two families, 1 + 3 samples
    awake = _exposition(1).splitlines()
    assert [ln.rsplit(" ", 1)[0] for ln in awake] == [ln.rsplit(" ", 1)[0] for ln in real]
    assert [a for a, r in zip(awake, real, strict=True) if a != r] == \
        ['vllm:num_requests_running{engine="0",model_name="m"} 0.0']
    asleep = _exposition(0).splitlines()
    assert [a for a, b in zip(asleep, awake, strict=True) if a != b] == [
        'vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0',
        'vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} '
        '1.0']


def _info(body: bytes) -> list[dict[str, str]]:
    samples, _meta = parse_exposition(body.decode())
    return [dict(labels) for name, labels, _v in samples if name == "modelserver_model_info"]


def _cfg(base: str) -> object:
    # generous: the verdicts must not depend on how fast a loaded machine answers
    return parse_config({"scrape": {"interval_seconds": 10, "timeout_seconds": 10},
                         "targets": [{"name": "vllm", "kind": "vllm",
                                      "url": base + "/metrics"}]})


def test_engine_version_and_registry_quantization_on_the_info_series():
    async def scenario() -> None:
        fake = SleepModeVLLMDouble()
        async with scraping(fake) as scraper:
            await scraper.scrape_once()
            [info] = _info(scraper.body)
            assert info["engine_version"] == "0.32.0"
            assert info["quantization"] == "fp8"  # vLLM does not say: the registry's
            await scraper.scrape_once()
            assert fake.version_calls == 1  # asked once while the target stays up
            # the upstream goes down: no info series while it is down
            await fake.stop()
            await scraper.scrape_once()
            assert _info(scraper.body) == []

    asyncio.run(scenario())


def test_an_upgrade_is_a_new_info_series():
    async def scenario() -> None:
        fake = SleepModeVLLMDouble()
        async with scraping(fake) as scraper:
            await scraper.scrape_once()
            before = _info(scraper.body)
            st = scraper.states["vllm"]
            scraper._mark_down(st, "connection", "restarting")  # what a failed scrape does
            fake.version = {"version": "0.33.0"}
            await scraper.scrape_once()
            after = _info(scraper.body)
            assert [i["engine_version"] for i in before + after] == ["0.32.0", "0.33.0"]
            assert {k: v for k, v in before[0].items() if k != "engine_version"} == \
                {k: v for k, v in after[0].items() if k != "engine_version"}

    asyncio.run(scenario())


@pytest.mark.parametrize("answer", [{"version": ""}, {"v": "1"}, ["0.32.0"], "text"])
def test_an_unreadable_version_answer_leaves_engine_version_empty(answer):
    async def scenario() -> None:
        fake = SleepModeVLLMDouble()
        fake.version = answer
        async with scraping(fake) as scraper:
            await scraper.scrape_once()
            await scraper.scrape_once()
            [info] = _info(scraper.body)
            assert info["engine_version"] == ""
            assert fake.version_calls == 2  # no usable answer: asked again

    asyncio.run(scenario())


def test_a_sleeping_engine_is_not_ready_and_ready_again_when_it_wakes():
    async def scenario() -> None:
        fake = SleepModeVLLMDouble()
        async with scraping(fake) as scraper:
            await scraper.scrape_once()
            ok, _detail = readiness(scraper)
            assert ok
            fake.awake = 0  # /health still answers 200
            await scraper.scrape_once()
            ok, detail = readiness(scraper)
            assert not ok
            assert detail["targets"]["vllm"]["models_sleeping"] == ["m"]
            assert detail["targets"]["vllm"]["models_not_ready"] == ["m"]
            assert detail["targets"]["vllm"]["up"]  # not an outage: metrics still served
            fake.awake = 1
            await scraper.scrape_once()
            ok, detail = readiness(scraper)
            assert ok and detail["targets"]["vllm"]["models_sleeping"] == []

    asyncio.run(scenario())


@pytest.mark.parametrize("value,why", [
    ("FP8", "is not a quantization name"), ("", "is not a quantization name"),
    ("fp 8", "is not a quantization name"), (8, "is not text"), (True, "is not text"),
])
def test_registry_quantization_is_validated_strictly(value, why):
    with pytest.raises(RegistryError, match=why):
        parse_registry({"models": [{"name": "m", "team": "t", "owner": "o", "oncall": "c",
                                    "quantization": value}]}, "reg.yaml")


def test_server_reported_quantization_wins_over_the_registry():
    key = ("m", "", "vllm", "vllm")
    [line] = REGISTRY.info_lines([key], {key: {"engine_version": "0.32.0",
                                              "quantization": "awq"}})
    assert 'engine_version="0.32.0"' in line and 'quantization="awq"' in line
    [line] = REGISTRY.info_lines([("other", "", "vllm", "vllm")])
    assert 'engine_version="",quantization=""' in line
