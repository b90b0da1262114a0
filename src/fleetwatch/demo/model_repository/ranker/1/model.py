"""Demo ranker, version 1 (Triton Python backend).

A linear scorer over 4 features: ``SCORE = INPUT0 @ WEIGHTS``. ``INPUT0`` is FP32 with shape
[batch, 4] and ``SCORE`` FP32 with shape [batch, 1]. Each ``execute()`` call (one dynamic batch)
sleeps ``EXECUTE_DELAY_S`` to give the model a measurable, stable latency.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

WEIGHTS = np.array([[0.4], [0.3], [0.2], [0.1]], dtype=np.float32)
EXECUTE_DELAY_S = 0.003


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(EXECUTE_DELAY_S)
        responses = []
        for request in requests:
            features = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            score = (features.astype(np.float32) @ WEIGHTS).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SCORE", score)]))
        return responses
