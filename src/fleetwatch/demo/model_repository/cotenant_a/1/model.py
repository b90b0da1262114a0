"""Demo co-located model for interference tests (Triton Python backend): ``cotenant_a`` and
``cotenant_b`` stand for two models sharing one GPU.

``Y = X`` (FP32, shape [n]). Each request holds **the shared device** for the model's service
time: an exclusive ``fcntl.flock`` on one lock file that every model of the same Triton server
takes (Triton runs each Python model instance in its own stub process, so a cross-process lock
is what they can share). While ``cotenant_b`` is busy, ``cotenant_a``'s requests wait for the
lock, as kernels of two models wait for one GPU; when it is idle they do not. The lock file is
``<tmp>/fleetwatch-shared-device-<tritonserver pid>.lock`` (the stubs' parent process), so two
Triton servers never contend, or the config parameter ``lock_path``.

Service time (seconds, sleeping while holding the lock): the config parameter
``service_time_s``, or ``service_time_s_v<version>`` for one version (``cotenant_a`` version 2
is the slowed "regression").

Latency is observed end to end from the client's send time ``T0`` (INT64 ns since the epoch,
``fleetwatch.demo.load.slo_sim_inputs``) like ``slo_sim``, and exported through
``pb_utils.MetricFamily`` as Triton's vLLM backend names it
(``vllm:e2e_request_latency_seconds``, buckets ``E2E_BUCKETS``), so fleetwatch's "Triton vLLM
backend" mapping applies. Version 2 and ``cotenant_b`` load this file (one implementation).
"""

import fcntl
import os
import tempfile
import time

import numpy as np
import triton_python_backend_utils as pb_utils

E2E_BUCKETS = [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56]
MAX_PLAUSIBLE_NS = 3600 * 10**9


def _parameter(config, key):
    value = config.get("parameters", {}).get(key)
    return None if value is None else value.get("string_value")


class TritonPythonModel:
    def initialize(self, args):
        import json

        config = json.loads(args["model_config"])
        version = args["model_version"]
        self.service_time_s = float(
            _parameter(config, f"service_time_s_v{version}")
            or _parameter(config, "service_time_s")
            or 0.01
        )
        self.lock_path = _parameter(config, "lock_path") or os.path.join(
            tempfile.gettempdir(), f"fleetwatch-shared-device-{os.getppid()}.lock"
        )
        self.lock = open(self.lock_path, "a")  # noqa: SIM115 - held for the model's life
        labels = {"model": args["model_name"], "version": version}
        self.e2e_family = pb_utils.MetricFamily(
            name="vllm:e2e_request_latency_seconds",
            description="Histogram of end to end request latency in seconds.",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        self.e2e = self.e2e_family.Metric(labels=labels, buckets=E2E_BUCKETS)

    def execute(self, requests):
        started_ns = time.time_ns()
        outputs = []
        for request in requests:
            fcntl.flock(self.lock, fcntl.LOCK_EX)
            try:
                time.sleep(self.service_time_s)
            finally:
                fcntl.flock(self.lock, fcntl.LOCK_UN)
            values = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            outputs.append(pb_utils.Tensor("Y", values.astype(np.float32)))
        now_ns = time.time_ns()
        for request in requests:
            t0 = pb_utils.get_input_tensor_by_name(request, "T0")
            elapsed_ns = now_ns - started_ns
            if t0 is not None and t0.as_numpy().size:
                sent = now_ns - int(t0.as_numpy().flat[0])
                if 0 <= sent <= MAX_PLAUSIBLE_NS:
                    elapsed_ns = sent
            self.e2e.observe(elapsed_ns / 1e9)
        return [pb_utils.InferenceResponse(output_tensors=[output]) for output in outputs]

    def finalize(self):
        del self.e2e  # metrics before their families (the backend refuses the other order)
        del self.e2e_family
        self.lock.close()
