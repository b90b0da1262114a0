"""Demo decoupled (streaming) model that emits vLLM-backend-format metrics (Triton Python backend).

This is a demo stand-in for an LLM served by Triton's vLLM backend; there is no language model.
One request carries ``N`` (INT32, shape [1]); the model streams ``min(max(N, 0), MAX_RESPONSES)``
responses, each with one ``TOKEN`` (INT32, shape [1], the values 0, 1, 2, ...), then sends the
final flag. It waits ``PREFILL_DELAY_S`` before the first response and ``INTER_TOKEN_DELAY_S``
between responses.

It exports custom metrics through ``pb_utils.MetricFamily`` with the names, label keys
(``model``, ``version``), descriptions and buckets that Triton's vLLM backend uses, so that
fleetwatch's "Triton vLLM backend" mapping applies to it:

* ``vllm:time_to_first_token_seconds`` (histogram, seconds): measured inside the model from the
  start of ``execute()`` to the first response being sent; queueing before ``execute()`` is not
  included.
* ``vllm:prompt_tokens_total`` (counter): by convention of this demo, ``PROMPT_TOKENS_PER_TOKEN``
  prompt tokens per requested response (there is no real prompt).
* ``vllm:generation_tokens_total`` (counter): one per streamed response.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

MAX_RESPONSES = 64
PREFILL_DELAY_S = 0.010
INTER_TOKEN_DELAY_S = 0.005
PROMPT_TOKENS_PER_TOKEN = 2
# The bucket boundaries of vllm:time_to_first_token_seconds in Triton's vLLM backend.
TTFT_BUCKETS = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
    0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
]  # fmt: skip


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        # The families must outlive their metrics: keep references on the instance.
        self.ttft_family = pb_utils.MetricFamily(
            name="vllm:time_to_first_token_seconds",
            description="Histogram of time to first token in seconds.",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        self.prompt_tokens_family = pb_utils.MetricFamily(
            name="vllm:prompt_tokens_total",
            description="Number of prefill tokens processed.",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.generation_tokens_family = pb_utils.MetricFamily(
            name="vllm:generation_tokens_total",
            description="Number of generation tokens processed.",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.ttft = self.ttft_family.Metric(labels=labels, buckets=TTFT_BUCKETS)
        self.prompt_tokens = self.prompt_tokens_family.Metric(labels=labels)
        self.generation_tokens = self.generation_tokens_family.Metric(labels=labels)

    def execute(self, requests):
        for request in requests:
            started = time.monotonic()
            sender = request.get_response_sender()
            requested = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
            n = min(max(int(requested.flat[0]), 0), MAX_RESPONSES) if requested.size else 0
            sent = 0
            for index in range(n):
                if sender.is_cancelled():
                    break
                time.sleep(PREFILL_DELAY_S if index == 0 else INTER_TOKEN_DELAY_S)
                token = pb_utils.Tensor("TOKEN", np.array([index], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[token]))
                if index == 0:
                    self.ttft.observe(time.monotonic() - started)
                sent += 1
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            if n:
                self.prompt_tokens.increment(PROMPT_TOKENS_PER_TOKEN * n)
            if sent:
                self.generation_tokens.increment(sent)
        return None

    def finalize(self):
        # Metrics before their families (the backend refuses the other order).
        del self.ttft, self.prompt_tokens, self.generation_tokens
        del self.ttft_family, self.prompt_tokens_family, self.generation_tokens_family
