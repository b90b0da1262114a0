"""Demo latency-vs-concurrency model for SLO tests, version 1 (Triton Python backend).

``Y = X`` (FP32, shape [n]). Each request takes ``SERVICE_TIME_S`` of (sleeping) work. The model
has one instance and no batching: Triton runs ``execute()`` of one instance one call at a time,
so concurrent requests wait in Triton's queue and, under a closed loop of ``c`` clients, a
request's latency is about ``c * SERVICE_TIME_S``. Version 2 is the same model with 6.25 times
the service time (a "regression" that is slow even at concurrency 1).

Latency is measured end to end. Queueing happens in Triton before ``execute()`` and is not
visible inside the model, so the client sends its send time in the optional input ``T0``
(INT64, shape [1], ``time.time_ns()``: nanoseconds since the Unix epoch; client and server run
on the same machine, so on the same clock). The model observes ``now - T0`` just before it
returns the response: client serialization, transport, Triton's queue and the service time.
Without ``T0`` (or with an implausible one: in the future or more than an hour old) it
observes the time since ``execute()`` started instead, which leaves the queueing out.

It exports through ``pb_utils.MetricFamily`` with the names, label keys (``model``,
``version``) and descriptions of Triton's vLLM backend, so fleetwatch's "Triton vLLM backend"
mapping applies to it:

* ``vllm:e2e_request_latency_seconds`` (histogram, seconds; buckets ``E2E_BUCKETS``);
* ``vllm:time_to_first_token_seconds`` (histogram, seconds; vLLM's buckets): the same
  observation, since the one response of a non-decoupled model is also the first.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

SERVICE_TIME_S = 0.008
E2E_BUCKETS = [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56]
# The bucket boundaries of vllm:time_to_first_token_seconds in Triton's vLLM backend.
TTFT_BUCKETS = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
    0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
]  # fmt: skip
MAX_PLAUSIBLE_NS = 3600 * 10**9


def _latency_s(request, now_ns, execute_started_ns):
    """Seconds since the client's ``T0`` if present and plausible, else since execute() began."""
    t0 = pb_utils.get_input_tensor_by_name(request, "T0")
    if t0 is not None:
        values = t0.as_numpy()
        if values.size:
            elapsed_ns = now_ns - int(values.flat[0])
            if 0 <= elapsed_ns <= MAX_PLAUSIBLE_NS:
                return elapsed_ns / 1e9
    return (now_ns - execute_started_ns) / 1e9


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        # The families must outlive their metrics: keep references on the instance.
        self.e2e_family = pb_utils.MetricFamily(
            name="vllm:e2e_request_latency_seconds",
            description="Histogram of end to end request latency in seconds.",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        self.ttft_family = pb_utils.MetricFamily(
            name="vllm:time_to_first_token_seconds",
            description="Histogram of time to first token in seconds.",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        self.e2e = self.e2e_family.Metric(labels=labels, buckets=E2E_BUCKETS)
        self.ttft = self.ttft_family.Metric(labels=labels, buckets=TTFT_BUCKETS)

    def execute(self, requests):
        execute_started_ns = time.time_ns()
        outputs = []
        for request in requests:
            time.sleep(SERVICE_TIME_S)
            values = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            outputs.append(pb_utils.Tensor("Y", values.astype(np.float32)))
        now_ns = time.time_ns()
        for request in requests:
            latency_s = _latency_s(request, now_ns, execute_started_ns)
            self.e2e.observe(latency_s)
            self.ttft.observe(latency_s)
        return [pb_utils.InferenceResponse(output_tensors=[output]) for output in outputs]

    def finalize(self):
        # Metrics before their families (the backend refuses the other order).
        del self.e2e, self.ttft
        del self.e2e_family, self.ttft_family
