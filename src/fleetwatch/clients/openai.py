"""One timed request to an OpenAI-compatible LLM server (vLLM's ``/v1/completions`` and
``/v1/chat/completions``, streamed as SSE or not), and word prompts.

:func:`send_request` records per request (:class:`LLMResult`, times in seconds:
``time.perf_counter`` for durations, ``time.time`` for the Unix start time):

* ``ttft_s``: client-side time to first token — from just before the request is sent to the
  first streamed ``data:`` chunk that carries a choice (streaming only; None otherwise);
* ``e2e_s``: from just before the request is sent to the end of the response body;
* the HTTP status, ``finish_reason`` and the token counts the server reports (``usage``).

It never raises for an HTTP or connection error (the result says it). Prompts
(:func:`make_prompt`) are drawn from a fixed word list with a caller's seeded RNG, so they
are reproducible.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

__all__ = ["KEEPALIVE_S", "LLMRequest", "LLMResult", "make_prompt", "send_request"]

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
