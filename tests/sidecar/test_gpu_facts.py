"""The sidecar serves the shared-GPU accounting (fleetwatch.sidecar.gpu_facts) on /metrics:
placement, footprints, quota usage and limits, policy violations — the same figures as the
offline assessment of the same captures (tests/gpu/test_gpu.py's hand computation), fed
through the real scraper, body observer, snapshot subscriber and Triton API refresh.

Upstreams are ``CapturedServer``, a test double serving real captured bodies
(tests/fixtures/expositions) and the real Triton 2.51 model configuration and statistics
documents (tests/data/gpu; a copy with a ``KIND_GPU`` group, since the demo Triton runs on
the CPU). The output is checked by ``promtool check metrics`` too.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import subprocess

import aiohttp
from aiohttp import web

from fleetwatch.commands.gpu_inputs import load_assessment
from fleetwatch.gpu.assess import exposition
from fleetwatch.labels.registry import load_registry
from fleetwatch.sidecar.config import load_config
from fleetwatch.sidecar.gpu_facts import GPUAccounting
from fleetwatch.sidecar.server import run_sidecar
from tests.gpu.test_gpu import CAPTURES, DATA, L4, L4_UUID, T_UUID, TRITON_UUID, VLLM

CONFIG = json.loads((DATA / "triton-2.51-ranker-config.json").read_text())
STATS = json.loads((DATA / "triton-2.51-ranker-stats.json").read_text())


class CapturedServer:
    """Test double: serves one captured /metrics body and Triton model documents."""

    def __init__(self, body: str, docs: dict[str, object] | None = None) -> None:
        self.body, self.docs = body, docs or {}
        self.asked: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> CapturedServer:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/{path:.*}", self._doc)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.body)

    async def _doc(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["path"]
        self.asked.append(path)
        if path in self.docs:
            return web.json_response(self.docs[path])
        return web.Response(status=404 if "ready" not in path else 200)

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def _config(urls: dict[str, str]):
    cfg = load_config(DATA / "sidecar.yaml")
    targets = [t.model_copy(update={"url": f"{urls[t.name]}/metrics"}) for t in cfg.targets]
    return cfg.model_copy(update={"targets": targets,
                                  "listen": cfg.listen.model_copy(update={"port": 0}),
                                  "scrape": cfg.scrape.model_copy(
                                      update={"interval_seconds": 0.2})})


async def _serve_and_fetch(cfg, registry, cycles: int = 3) -> str:
    stop, ports = asyncio.Event(), []
    task = asyncio.create_task(run_sidecar(cfg, registry, stop=stop, on_ready=ports.append))
    try:
        while not ports:
            await asyncio.sleep(0.05)
        async with aiohttp.ClientSession() as s:
            for _ in range(200):  # until the accounting of a full cycle is served
                await asyncio.sleep(0.1)
                async with s.get(f"http://127.0.0.1:{ports[0]}/metrics") as resp:
                    text = await resp.text()
                if "fleetwatch_quota_usage" in text and f'gpu_uuid="{T_UUID}"' in text:
                    cycles -= 1
                    if cycles == 0:
                        return text
        raise AssertionError("the sidecar never served the GPU accounting:\n" + text)
    finally:
        stop.set()
        await task


def test_sidecar_serves_what_the_offline_assessment_computes(tmp_path) -> None:
    p100 = next(c for c in CAPTURES if "P100" in c)

    async def run() -> str:
        async with CapturedServer(L4.read_text()) as dcgm, \
                CapturedServer(VLLM.read_text()) as vllm, \
                CapturedServer(TRITON_UUID.read_text()) as triton, \
                CapturedServer(open(p100).read()) as triton2:
            cfg = _config({"gpus": dcgm.url, "vllm": vllm.url, "triton": triton.url})
            extra = cfg.targets[0].model_copy(update={
                "name": "triton2", "url": f"{triton2.url}/metrics",
                "labels": {"server": "p100"}})
            cfg = cfg.model_copy(update={"targets": [*cfg.targets, extra]})
            return await _serve_and_fetch(cfg, load_registry(DATA / "registry.yaml"))

    served = asyncio.run(run())
    # a sidecar counts the models its targets serve (ranker is declared, not served)
    offline = exposition(load_assessment(str(DATA / "sidecar.yaml"), None, CAPTURES, (), (),
                                         served_only=True))
    assert 'fleetwatch_quota_usage{team="search",resource="instances"} 0' in served
    families = ("modelserver_model_placement", "modelserver_model_memory_footprint_bytes",
                "fleetwatch_quota_usage", "fleetwatch_quota_limit",
                "fleetwatch_quota_model_usage", "fleetwatch_quota_model_limit")
    for fam in families:
        want = sorted(line for line in offline.splitlines() if line.startswith(fam + "{"))
        got = sorted(line for line in served.splitlines() if line.startswith(fam + "{"))
        assert want and got == want, fam
    out = tmp_path / "metrics.prom"
    out.write_text(served)
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: install Debian's prometheus package"
    res = subprocess.run([promtool, "check", "metrics"], input=served, text=True,
                         capture_output=True, timeout=60)
    problems = [line for line in (res.stdout + res.stderr).splitlines()
                if any(f in line for f in (*families, "fleetwatch_placement_violation"))]
    assert not problems, problems


def test_triton_api_refresh_reads_instance_groups_and_memory_usage() -> None:
    gpu_config = copy.deepcopy(CONFIG)
    gpu_config["instance_group"][0].update(kind="KIND_GPU", count=2, gpus=[0])
    gpu_stats = copy.deepcopy(STATS)
    gpu_stats["model_stats"][0]["memory_usage"] = [{"type": "GPU", "id": 0,
                                                    "byte_size": 5 * 2**20}]
    triton_body = (DATA.parent.parent / "fixtures" / "expositions" / "triton" /
                   "triton-2.51.0-pytriton-cpu-two-models-summaries.prom").read_text()

    async def run() -> tuple[str, list[str]]:
        # the capture serves models add and identity_dyn: add gets the documents
        docs = {"/v2/models/add/config": gpu_config, "/v2/models/add/stats": gpu_stats}
        async with CapturedServer(L4.read_text()) as dcgm, \
                CapturedServer(triton_body, docs) as triton:
            cfg = load_config(DATA / "sidecar.yaml").model_copy(update={"placement": []})
            cfg = cfg.model_copy(update={"targets": [
                cfg.targets[0].model_copy(update={"url": f"{triton.url}/metrics",
                                                  "api_url": triton.url}),
                cfg.targets[2].model_copy(update={"url": f"{dcgm.url}/metrics"})]})
            stop, ports = asyncio.Event(), []
            old = GPUAccounting.REFRESH_SECONDS
            GPUAccounting.REFRESH_SECONDS = 0.2
            task = asyncio.create_task(run_sidecar(
                cfg.model_copy(update={"listen": cfg.listen.model_copy(update={"port": 0}),
                                       "scrape": cfg.scrape.model_copy(
                                           update={"interval_seconds": 0.2})}),
                load_registry(DATA / "registry.yaml"), stop=stop, on_ready=ports.append))
            try:
                while not ports:
                    await asyncio.sleep(0.05)
                async with aiohttp.ClientSession() as s:
                    for _ in range(200):
                        await asyncio.sleep(0.1)
                        async with s.get(f"http://127.0.0.1:{ports[0]}/metrics") as resp:
                            text = await resp.text()
                        if "triton_statistics" in text and \
                                triton.asked.count("/v2/models/add/stats") >= 2:
                            return text, triton.asked
            finally:
                GPUAccounting.REFRESH_SECONDS = old
                stop.set()
                await task
            raise AssertionError("no footprint from the Triton statistics:\n" + text)

    text, asked = asyncio.run(run())
    assert (f'modelserver_model_placement{{model="add",model_version="",backend="triton",'
            f'gpu_uuid="{L4_UUID}",instances="2"}} 1') in text
    assert (f'modelserver_model_memory_footprint_bytes{{model="add",model_version="",'
            f'backend="triton",gpu_uuid="{L4_UUID}",footprint_source="triton_statistics"}} '
            f'{5 * 2**20}') in text
    assert "modelserver_model_placement{model=\"identity_dyn\"" not in text  # no config
    # the config once by the runtime probe, once by the accounting; stats every refresh
    assert asked.count("/v2/models/add/config") == 2
    assert asked.count("/v2/models/identity_dyn/config") >= 2  # not found: asked again
    assert asked.count("/v2/models/add/stats") >= 2


def test_the_chained_slo_body_is_one_object_while_unchanged() -> None:
    """``/metrics`` re-encodes the SLO segment when its bytes object changes, so the chain
    of the engine's body and the GPU families must hand out the same object until one
    side changes."""
    from fleetwatch.sidecar.config import parse_config
    from fleetwatch.sidecar.gpu_facts import GPUAccounting

    acc = GPUAccounting(parse_config({"targets": [{"name": "t",
                                                    "url": "http://127.0.0.1:1/metrics"}]}),
                        None, None, {})  # type: ignore[arg-type]
    engine_body = [b"# engine 1\n"]
    joined = acc.chain(lambda: engine_body[0])
    first = joined()
    assert joined() is first and first == b"# engine 1\n"
    engine_body[0] = b"# engine 2\n"
    assert joined() == b"# engine 2\n" and joined() is joined()
    acc._text = b"# gpu\n"
    assert joined() == b"# engine 2\n# gpu\n"
