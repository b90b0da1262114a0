"""Demo model that fails on purpose (Triton Python backend).

``OUTPUT0 = INPUT0`` (FP32, shape [n]). If the first value of ``INPUT0`` is negative,
``execute()`` raises ``ValueError``: Triton then fails the request and counts it as
``nv_inference_request_failure{reason="BACKEND"}``. (Returning an error *response* instead
would be counted as a success by Triton 2.51.) The model is not decoupled: an exception in a
decoupled model's ``execute()`` leaves its requests hanging.

Without dynamic batching each ``execute()`` call carries one request, so a negative input fails
exactly one request.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if values.size and values.flat[0] < 0:
                raise ValueError(f"faulty: negative input {float(values.flat[0])!r} rejected")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", values)]))
        return responses
