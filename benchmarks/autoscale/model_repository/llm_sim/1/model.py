"""llm_sim: an LLM-shaped decoupled Triton Python model whose work is timed waits.

Each request (``text_input``, optional ``max_tokens`` and ``prompt_tokens``) enters the
continuous-batching scheduler of ``benchmarks/autoscale/llm_engine.py`` (slot limit, KV-block
budget, step time growing with the batch and the prompt) after the engine's ``frontend_s``;
an asyncio loop on its own thread sleeps each step's duration and streams one
``text_output`` response per generated token, then the final flag. Nothing is computed, so
a replica's capacity is its scheduler's, and replicas add capacity like GPUs do.

Metrics (``pb_utils.MetricFamily``, labels ``model`` and ``version`` as Triton's vLLM
backend sets them): the backend's ``vllm:time_to_first_token_seconds``,
``vllm:time_per_output_token_seconds``, ``vllm:e2e_request_latency_seconds``,
``vllm:request_prompt_tokens``, ``vllm:request_generation_tokens``,
``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``; and standalone vLLM's
``vllm:num_requests_running``, ``vllm:num_requests_waiting`` and
``vllm:kv_cache_usage_perc`` (gauges Triton's vLLM backend does not export; the other
autoscalers of the experiment read them raw from Triton's ``/metrics``).

The engine configuration is ``llm_engine.CALIBRATED``; the model parameter
``ENGINE_CONFIG`` (a JSON object of `EngineConfig` fields) overrides fields of it.
"""

import asyncio
import dataclasses
import importlib.util
import itertools
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

_ENGINE_FILE = Path(__file__).resolve().parents[3] / "llm_engine.py"
_spec = importlib.util.spec_from_file_location("fleetwatch_bench_llm_engine", _ENGINE_FILE)
llm_engine = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = llm_engine
_spec.loader.exec_module(llm_engine)

#: Default output length when the request gives no ``max_tokens``.
DEFAULT_MAX_TOKENS = 16
#: Upper bound of ``max_tokens`` and of estimated prompt tokens (bounded work per request).
MAX_TOKENS_LIMIT = 4096
#: Bytes of prompt text per token when the client does not say how many tokens it sent.
BYTES_PER_TOKEN = 4
TOKEN_TEXT = llm_engine.TOKEN_TEXT.encode()
LATENCY_BUCKETS = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
    0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
]  # fmt: skip
TOKEN_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]


def _scalar(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    array = tensor.as_numpy()
    return array.flat[0] if array.size else None


class _Live:
    """A request in flight: its sender and wall-clock times (time.monotonic)."""

    def __init__(self, sender, sent_s):
        self.sender = sender
        self.sent_s = sent_s
        self.last_token_s = None
        self.tokens = 0
        self.pending = 0


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        overrides = config.get("parameters", {}).get("ENGINE_CONFIG", {}).get("string_value")
        self.config = llm_engine.CALIBRATED
        if overrides:
            self.config = dataclasses.replace(self.config, **json.loads(overrides))
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self._families = []

        def family(name, description, kind):
            f = pb_utils.MetricFamily(name=name, description=description, kind=kind)
            self._families.append(f)
            return f

        H, C, G = (pb_utils.MetricFamily.HISTOGRAM, pb_utils.MetricFamily.COUNTER,
                   pb_utils.MetricFamily.GAUGE)
        self.m_ttft = family("vllm:time_to_first_token_seconds",
                             "Histogram of time to first token in seconds.", H
                             ).Metric(labels=labels, buckets=LATENCY_BUCKETS)
        self.m_itl = family("vllm:time_per_output_token_seconds",
                            "Histogram of time per output token in seconds.", H
                            ).Metric(labels=labels, buckets=LATENCY_BUCKETS)
        self.m_e2e = family("vllm:e2e_request_latency_seconds",
                            "Histogram of end to end request latency in seconds.", H
                            ).Metric(labels=labels, buckets=LATENCY_BUCKETS)
        self.m_req_prompt = family("vllm:request_prompt_tokens",
                                   "Number of prefill tokens processed.", H
                                   ).Metric(labels=labels, buckets=TOKEN_BUCKETS)
        self.m_req_gen = family("vllm:request_generation_tokens",
                                "Number of generation tokens processed.", H
                                ).Metric(labels=labels, buckets=TOKEN_BUCKETS)
        self.m_prompt = family("vllm:prompt_tokens_total",
                               "Number of prefill tokens processed.", C).Metric(labels=labels)
        self.m_gen = family("vllm:generation_tokens_total",
                            "Number of generation tokens processed.", C).Metric(labels=labels)
        self.m_running = family("vllm:num_requests_running",
                                "Number of requests in model execution batches.", G
                                ).Metric(labels=labels)
        self.m_waiting = family("vllm:num_requests_waiting",
                                "Number of requests waiting to be processed.", G
                                ).Metric(labels=labels)
        self.m_kv = family("vllm:kv_cache_usage_perc",
                           "KV-cache usage. 1 means 100 percent usage.", G).Metric(labels=labels)
        self.engine = llm_engine.Engine(self.config)
        self.live = {}
        self.ids = itertools.count()
        self.loop = asyncio.new_event_loop()
        self.wake = asyncio.Event()
        self.thread = threading.Thread(target=self._serve, name="llm_sim", daemon=True)
        self.thread.start()

    def _serve(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._run())

    def execute(self, requests):
        now = time.monotonic()
        for request in requests:
            sender = request.get_response_sender()
            text = _scalar(request, "text_input")
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text or "")
            given = _scalar(request, "prompt_tokens")
            prompt = int(given) if given is not None else len(text.encode()) // BYTES_PER_TOKEN
            wanted = _scalar(request, "max_tokens")
            output = int(wanted) if wanted is not None else DEFAULT_MAX_TOKENS
            prompt = min(max(prompt, 1), MAX_TOKENS_LIMIT)
            output = min(max(output, 1), MAX_TOKENS_LIMIT)
            self.loop.call_soon_threadsafe(self._arrive, sender, now, prompt, output)
        return None

    def _arrive(self, sender, sent_s, prompt, output):
        request_id = next(self.ids)
        self.live[request_id] = _Live(sender, sent_s)
        self.loop.call_later(self.config.frontend_s, self._queue, request_id, prompt, output)

    def _queue(self, request_id, prompt, output):
        self.engine.add(llm_engine.Request(request_id, prompt, output, time.monotonic()))
        self.wake.set()

    async def _run(self):
        while True:
            if not self.engine.busy:
                self._gauges()
                self.wake.clear()
                await self.wake.wait()
                continue
            step = self.engine.step(time.monotonic())
            self._gauges()
            await asyncio.sleep(step.duration_s)
            delay = self.config.first_token_per_seq_s * step.batch
            for request in step.tokens:
                if self.live.get(request.request_id) is not None and \
                        self.live[request.request_id].last_token_s is None and \
                        request.generated == 1:
                    self.loop.call_later(delay, self._emit, request, True)
                else:
                    self._emit(request, False)

    def _emit(self, request, first):
        """Account the token ``request`` got and stream what is due (``chunk_due``: the
        first token alone, then chunks of ``stream_interval`` tokens, the rest at the
        end). Tokens of a request whose first token is still being delivered wait for
        it, so the client sees them in order, and go with it. The request is done when
        all its tokens are accounted here (the engine marks it finished when its last
        step begins, which may be before its delayed first token is out)."""
        live = self.live.get(request.request_id)
        if live is None:
            return
        live.tokens += 1
        live.pending += 1
        if not first and live.last_token_s is None:
            return
        now = time.monotonic()
        if first:
            self.m_ttft.observe(now - live.sent_s)
        else:
            self.m_itl.observe(now - live.last_token_s)
        live.last_token_s = now
        done = live.tokens >= request.output_tokens
        if done:  # counted before the final flag: a client that saw it sees them
            del self.live[request.request_id]
            self.m_e2e.observe(now - live.sent_s)
            self.m_req_prompt.observe(request.prompt_tokens)
            self.m_req_gen.observe(live.tokens)
            self.m_prompt.increment(request.prompt_tokens)
            self.m_gen.increment(live.tokens)
        if not self.config.chunk_due(live.pending, first, done):
            return
        text = np.array([TOKEN_TEXT * live.pending], dtype=np.object_)
        live.pending = 0
        try:
            live.sender.send(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("text_output", text)]))
            if done:
                live.sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:  # the client went away: the request still runs to its end
            pass

    def _gauges(self):
        self.m_running.set(len(self.engine.running))
        self.m_waiting.set(len(self.engine.waiting))
        self.m_kv.set(self.engine.kv_usage())

    def finalize(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        # Metrics before their families (the backend refuses the other order).
        del (self.m_ttft, self.m_itl, self.m_e2e, self.m_req_prompt, self.m_req_gen,
             self.m_prompt, self.m_gen, self.m_running, self.m_waiting, self.m_kv)
        del self._families
