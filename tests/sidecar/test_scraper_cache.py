"""The normalizer's caches between scrapes: the steady loop gives what a fresh normalizer
gives, whatever changed; learning a model's runtime recompiles that model's series only;
churn evicts series one by one (never a cold cycle for the series still exposed); new
models' series are compiled once, with their runtime; readiness probes on their own
cadence, concurrent and bounded.

``ProbedTriton`` extends the ``FaultTriton`` test double (Triton's /metrics, model config
and readiness) with request counting and a slow readiness answer.
"""

from __future__ import annotations

import asyncio
import random
import re

import pytest
from aiohttp import web

from fleetwatch.exporters import compile as compile_mod
from fleetwatch.exporters.normalize import Normalizer, value_of
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import TABLES, detect_kind
from fleetwatch.exporters.table import TargetContext
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from tests.sidecar.test_probes import FaultTriton
from tests.support.helpers import fixture_files

_NUMBER = re.compile(r"(?<= )(-?[0-9][0-9.e+-]*)$")


def _mutations(text: str, rng: random.Random, rounds: int) -> list[str]:
    """``rounds`` successors of an exposition: values moved, made invalid (NaN, negative,
    +Inf, text, '1_0') and valid again, CR line ends, duplicated and dropped lines."""
    lines = text.split("\n")
    out = []
    for _ in range(rounds):
        new = []
        for line in lines:
            if line and not line.startswith("#"):
                r = rng.random()
                if r < 0.3:
                    line = _NUMBER.sub(lambda m: str(abs(float(m.group(1))) * 2 + 1), line)
                elif r < 0.34:
                    line = _NUMBER.sub(rng.choice(["NaN", "-1", "+Inf", "abc", "1_0", "0"]),
                                       line)
                elif r < 0.36:
                    line += "\r"
                elif r < 0.38:
                    new.append(line)  # the same series twice
                elif r < 0.40:
                    continue  # left out this time
            new.append(line)
        out.append("\n".join(new))
    return out


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_the_steady_loop_gives_what_a_fresh_normalizer_gives(path):
    text = path.read_text()
    kind = detect_kind(text)
    if kind not in TABLES:
        pytest.fail(f"{path.name}: no table for {kind}")  # every fixture has a source
    rng = random.Random(path.name)
    for passthrough in (False, True):
        steady = Normalizer(TABLES[kind], passthrough=passthrough)
        for i, body in enumerate([text, text, *_mutations(text, rng, 6), text]):
            got = steady.normalize(body)
            want = Normalizer(TABLES[kind], passthrough=passthrough).normalize(body)
            if i < 2:  # the same history: the same bytes
                assert render([got]) == render([want])
            else:  # a series aggregated once stays at its family's end (as before)
                assert sorted(render([got]).split("\n")) == \
                    sorted(render([want]).split("\n"))
            assert _comparable(got.families) == _comparable(want.families)
            assert got.models == want.models
            assert got.invalid_samples == want.invalid_samples
            assert [(b.lineno, b.reason) for b in got.meta.invalid] == \
                [(b.lineno, b.reason) for b in want.meta.invalid]
            for prefix in (p for fam in got.families for p in fam):
                assert got.key(prefix) == want.key(prefix)


def _comparable(families):
    """Families with values as the repr of their float (NaN equals NaN; a series summed
    once in the history is a float where a fresh normalizer keeps the upstream text)."""
    return [{p: repr(value_of(v)) for p, v in fam.items()} for fam in families]


class _Counting:
    """Counts series compiled by SeriesCompiler.compile (monkeypatched) and, apart, the
    ones it left out for their model's runtime (``deferred``: read up to the model name)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.deferred = 0
        original = compile_mod.SeriesCompiler.compile

        def counted(compiler, key, meta):
            entry = original(compiler, key, meta)
            if entry.deferred is None:
                self.calls += 1
            else:
                self.deferred += 1
            return entry
        monkeypatch.setattr(compile_mod.SeriesCompiler, "compile", counted)


def _triton(models: list[str]) -> str:
    out = ["# TYPE nv_inference_request_success counter"]
    out += [f'nv_inference_request_success{{model="{m}",version="1"}} 5' for m in models]
    out += ["# TYPE nv_inference_count counter"]
    out += [f'nv_inference_count{{model="{m}",version="1"}} 9' for m in models]
    return "\n".join(out) + "\n"


def test_learning_a_runtime_recompiles_that_models_series_only(monkeypatch):
    runtimes = {"a": "python", "b": "python"}
    n = Normalizer(TABLES["triton"], TargetContext(runtime_for=lambda m: runtimes.get(m,
                                                                                    "unknown")))
    text = _triton(["a", "b", "c"])
    counting = _Counting(monkeypatch)
    first = render([n.normalize(text)])
    assert counting.calls == 6 and 'model="c"' in first
    runtimes["c"] = "onnxruntime"
    assert n.invalidate_models(["c"]) == 2
    counting.calls = 0
    body = render([n.normalize(text)])
    assert counting.calls == 2  # c's two series, nothing else
    assert body == render([Normalizer(TABLES["triton"], TargetContext(
        runtime_for=lambda m: runtimes.get(m, "unknown"))).normalize(text)])
    assert re.search(r'model="c",[^}]*runtime="onnxruntime"', body)
    assert re.search(r'model="a",[^}]*runtime="python"', body)


def test_churn_evicts_series_one_by_one(monkeypatch):
    """10 % new model names per exposition: each exposition compiles its new series only
    (never all of them again), and the cache stays within its bound."""
    n = Normalizer(TABLES["triton"])
    counting = _Counting(monkeypatch)
    names = [f"m{i}" for i in range(1000)]
    next_id = 1000
    bound = []
    for cycle in range(30):
        counting.calls = 0
        result = n.normalize(_triton(names))
        lines = result.meta.sample_lines
        assert counting.calls == (2000 if cycle == 0 else 200)
        bound.append(len(n._cache) / lines)
        if cycle == 0:
            keys_per_series = len(n._compiler.keys) / len(n._cache)
        # what compiling kept beside the cache (series keys) shrinks with it
        assert len(n._compiler.keys) <= keys_per_series * len(n._cache)
        for i in range(100):  # 10 % of the models replaced by new names
            names[(cycle * 100 + i) % 1000] = f"m{next_id}"
            next_id += 1
    assert n.evicted > 0
    assert max(bound) <= Normalizer.CACHE_SLACK + Normalizer.CACHE_FLOOR / 2000


class ProbedTriton(FaultTriton):
    """FaultTriton counting readiness requests, each answered after ``delay`` seconds;
    ``in_flight_max`` is the most answered at once."""

    def __init__(self, models: list[str]) -> None:
        super().__init__(models)
        self.ready_requests: list[str] = []
        self.delay = 0.0
        self.in_flight = 0
        self.in_flight_max = 0

    async def ready(self, request: web.Request) -> web.Response:
        self.ready_requests.append(request.match_info["model"])
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return await super().ready(request)
        finally:
            self.in_flight -= 1


def test_new_models_compiled_once_with_their_runtime_and_probes_on_their_cadence(
        monkeypatch):
    async def scenario():
        models = [f"m{i}" for i in range(40)]
        srv = ProbedTriton(models)
        srv.configs = {m: {"backend": "onnxruntime" if m == "m1" else "python"}
                       for m in models}
        srv.not_ready = {"m3"}
        srv.delay = 0.02
        base = await srv.start()
        cfg = parse_config({
            "scrape": {"interval_seconds": 1, "timeout_seconds": 1,
                       "readiness_interval_seconds": 3600, "probe_concurrency": 4},
            "targets": [{"name": "t", "kind": "triton", "url": f"{base}/metrics",
                         "api_url": base}]})
        counting = _Counting(monkeypatch)
        async with Scraper(cfg) as scraper:
            await scraper.scrape_once()
            # first exposure: every series compiled once, with its runtime (the first
            # pass left the new models' series out, the second compiled them)
            assert (counting.calls, counting.deferred) == (40, 40)
            body = scraper.body.decode()
            assert re.search(r'model="m1",[^}]*runtime="onnxruntime"', body)
            assert re.search(r'model="m2",[^}]*runtime="python"', body)
            assert "unknown" not in body
            assert srv.config_requests == 40
            assert sorted(srv.ready_requests) == sorted(models)
            assert srv.in_flight_max <= 4  # probe_concurrency
            assert scraper.states["t"].models_ready["m3"] is False
            for _ in range(3):
                srv.ready_requests.clear()
                await scraper.scrape_once()
                # the ready models wait for their cadence; the one not ready is asked again
                assert srv.ready_requests == ["m3"]
            assert srv.config_requests == 40 and counting.calls == 40
            srv.not_ready = set()
            await scraper.scrape_once()
            assert scraper.states["t"].models_ready["m3"] is True
            srv.ready_requests.clear()
            await scraper.scrape_once()
            assert srv.ready_requests == []
        await srv.stop()

    asyncio.run(scenario())


def test_ready_models_are_asked_again_spread_over_the_cadence():
    async def scenario():
        models = [f"m{i}" for i in range(30)]
        srv = ProbedTriton(models)
        srv.configs = {m: {"backend": "python"} for m in models}
        base = await srv.start()
        cfg = parse_config({
            "scrape": {"interval_seconds": 1, "timeout_seconds": 1,
                       "readiness_interval_seconds": 3},
            "targets": [{"name": "t", "kind": "triton", "url": f"{base}/metrics",
                         "api_url": base}]})
        async with Scraper(cfg) as scraper:
            await scraper.scrape_once()
            assert len(srv.ready_requests) == 30
            states = scraper.states["t"]
            for m in models:  # as if asked 3 s ago
                states.probed_at[m] -= 3.0
            asked = []
            for _ in range(3):
                srv.ready_requests.clear()
                await scraper.scrape_once()
                asked.append(len(srv.ready_requests))
            assert asked == [10, 10, 10]  # a third per scrape, never all at once
        await srv.stop()

    asyncio.run(scenario())
