"""A concurrency sweep against a real LLM server, with ``/metrics`` captures and a client log.

`run_sweep` steps a closed-loop client (`fleetwatch.demo.llm_load`) through concurrency
levels (default 1 → 2 → 4 → 8 → 16) for a fixed time each, and meanwhile captures the
server's ``/metrics`` every ``scrape_interval_s`` seconds (2 s by default) into
``captures/NNNN-<unix_ms>.prom``. Between steps the load is drained and the server is
scraped until it has counted every finished request (its ``e2e_request_latency_seconds``
``_count`` equals the requests sent so far), so each step lies exactly between two captures.

Files written to ``out_dir``:

* ``captures/NNNN-<unix_ms>.prom``: the body of each ``/metrics`` response (text 0.0.4);
  ``NNNN`` counts from 0000, ``unix_ms`` is the Unix time in milliseconds when the
  response arrived;
* ``requests.jsonl``: one `fleetwatch.clients.openai.LLMResult` per line (times in
  seconds, ``step`` = the concurrency as text);
* ``steps.json``: per step: ``concurrency``, ``start_capture``/``end_capture`` (the
  capture file names that bound it), ``t_start``/``t_end`` (Unix seconds) and
  ``requests``.

It reads only the one counter above from the server's text and imitates nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from fleetwatch.clients.openai import LLMResult
from fleetwatch.demo.llm_load import RequestMix, run_closed_loop

__all__ = ["SWEEP_MAX_TOKENS", "SweepResult", "SweepStep", "load_sweep", "run_sweep"]

#: Output budgets of the default request mix (tokens, ``ignore_eos``). Short: every token
#: is a streamed chunk the API server writes, and on 2 shared cores the API server, not the
#: engine, is the first bottleneck (budgets of 32–64 tokens put 0.2–1.6 s between the
#: client's TTFT and vLLM's own at concurrency 8).
SWEEP_MAX_TOKENS: tuple[int, ...] = (8, 16, 24)

_E2E_COUNT = re.compile(
    r"^vllm:e2e_request_latency_seconds_count(?:\{[^}]*\})?\s+(\S+)", re.MULTILINE
)


@dataclass
class SweepStep:
    """One concurrency step: the captures that bound it and the client's results."""

    concurrency: int
    start_capture: str
    end_capture: str
    t_start: float
    t_end: float
    results: list[LLMResult] = field(default_factory=list)


@dataclass
class SweepResult:
    """A finished sweep: its folder, steps and every capture file (in order)."""

    out_dir: Path
    steps: list[SweepStep]
    captures: list[Path]


def _finished_count(text: str) -> float:
    """Σ of vLLM's ``e2e_request_latency_seconds_count`` (every finished request)."""
    return sum(float(m.group(1)) for m in _E2E_COUNT.finditer(text))


class _Capturer:
    def __init__(self, metrics_url: str, folder: Path, session: aiohttp.ClientSession) -> None:
        self.metrics_url = metrics_url
        self.folder = folder
        self.session = session
        self.files: list[Path] = []
        self.lock = asyncio.Lock()

    async def fetch(self) -> str:
        async with self.session.get(
            self.metrics_url, headers={"Accept": "text/plain; version=0.0.4"}
        ) as response:
            response.raise_for_status()
            return await response.text()

    async def capture(self) -> tuple[Path, str]:
        async with self.lock:
            text = await self.fetch()
            path = self.folder / f"{len(self.files):04d}-{int(time.time() * 1000)}.prom"
            path.write_text(text, encoding="utf-8")
            self.files.append(path)
            return path, text

    async def capture_when_counted(self, expected: float, timeout_s: float = 10.0) -> Path:
        """Capture once the server has counted ``expected`` finished requests."""
        deadline = time.monotonic() + timeout_s
        while True:
            path, text = await self.capture()
            if _finished_count(text) >= expected or time.monotonic() >= deadline:
                return path
            await asyncio.sleep(0.05)

    async def periodic(self, interval_s: float, stop: asyncio.Event) -> None:
        next_tick = time.monotonic() + interval_s
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, next_tick - time.monotonic()))
                return
            except asyncio.TimeoutError:
                pass
            await self.capture()
            next_tick += interval_s


async def _sweep(base_url: str, metrics_url: str, model: str, out_dir: Path,
                 steps: Sequence[int], seconds_per_step: float, scrape_interval_s: float,
                 seed: int, mix: RequestMix | None) -> SweepResult:
    """:func:`run_sweep`'s work, in the event loop.

    Many parameters: :func:`run_sweep`'s, passed on unchanged."""
    captures = out_dir / "captures"
    captures.mkdir(parents=True, exist_ok=True)
    done: list[SweepStep] = []
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        capturer = _Capturer(metrics_url, captures, session)
        first, text = await capturer.capture()
        expected = _finished_count(text)
        stop = asyncio.Event()
        ticker = asyncio.create_task(capturer.periodic(scrape_interval_s, stop))
        boundary = first
        try:
            for index, concurrency in enumerate(steps):
                t_start = time.time()
                results = await run_closed_loop(
                    base_url, model, concurrency, duration_s=seconds_per_step, mix=mix,
                    seed=seed + index, step=str(concurrency))
                expected += sum(1 for r in results if r.ok)
                end = await capturer.capture_when_counted(expected)
                done.append(SweepStep(concurrency, boundary.name, end.name, t_start,
                                      time.time(), results))
                boundary = end
        finally:
            stop.set()
            await ticker
    with (out_dir / "requests.jsonl").open("w", encoding="utf-8") as log:
        for step in done:
            for result in step.results:
                log.write(result.to_json() + "\n")
    (out_dir / "steps.json").write_text(json.dumps([
        {"concurrency": s.concurrency, "start_capture": s.start_capture,
         "end_capture": s.end_capture, "t_start": s.t_start, "t_end": s.t_end,
         "requests": len(s.results)} for s in done], indent=1) + "\n", encoding="utf-8")
    return SweepResult(out_dir, done, list(capturer.files))


def run_sweep(base_url: str, metrics_url: str, model: str, out_dir: str | Path, *,
              steps: Sequence[int] = (1, 2, 4, 8, 16), seconds_per_step: float = 6.0,
              scrape_interval_s: float = 2.0, seed: int = 0,
              mix: RequestMix | None = None) -> SweepResult:
    """Run the sweep (see the module docstring) and write its files to ``out_dir``.

    Many parameters: the server's three addresses and names, the output folder, and the
    sweep's bounds as keyword-only options with defaults.

    Args:
        base_url: the OpenAI API base, e.g. ``http://127.0.0.1:8000``.
        metrics_url: the server's ``/metrics``.
        model: the served model name.
        out_dir: the folder to write (created).
        steps: the concurrency levels, in order.
        seconds_per_step: how long each step starts requests, in seconds (it then drains).
        scrape_interval_s: the capture interval, in seconds.
        seed: the request mix's seed (step ``i`` uses ``seed + i``).
        mix: the request mix (default: streaming only, half chat, `SWEEP_MAX_TOKENS`).
    """
    if mix is None:
        mix = RequestMix(max_tokens=SWEEP_MAX_TOKENS, prompt_words_min=20)
    return asyncio.run(_sweep(base_url, metrics_url, model, Path(out_dir), steps,
                              seconds_per_step, scrape_interval_s, seed, mix))


def load_sweep(
    folder: str | Path,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Path]]:
    """Read a sweep folder back: ``(steps, requests, captures)`` — the ``steps.json``
    entries, the ``requests.jsonl`` records (dicts) and the capture paths in order."""
    folder = Path(folder)
    steps = json.loads((folder / "steps.json").read_text(encoding="utf-8"))
    with (folder / "requests.jsonl").open(encoding="utf-8") as log:
        requests = [json.loads(line) for line in log if line.strip()]
    captures = sorted((folder / "captures").glob("*.prom"))
    return steps, requests, captures
