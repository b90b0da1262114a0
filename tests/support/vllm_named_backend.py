"""A test double for a Triton vLLM-backend model: a real tritonserver serving a model whose
configuration says ``backend: "vllm"``, run by a Python-based backend of that name.

The real vLLM backend cannot run here (no GPU, and the pytriton wheel carries none), but the
model-configuration lint reads only the configuration, which Triton itself validates and
answers on ``/v2/models/<m>/config``. Triton runs a ``backends/<name>/model.py`` with its
Python backend ("Python-based backends"), so :class:`TritonWithVLLMNamedBackend` puts an
identity ``model.py`` under ``backends/vllm/`` of the server's working directory.
"""

from __future__ import annotations

from pathlib import Path

from fleetwatch.demo.triton import TritonServer

#: The stand-in engine: returns its input ``X`` as ``Y``.
MODEL_PY = '''\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
            "Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
'''

#: A model configuration in front of it, with Triton's dynamic batcher on (the pitfall).
CONFIG_PBTXT = '''\
name: "{name}"
backend: "vllm"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
dynamic_batching {{ }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
'''


def write_model(repository: Path, name: str) -> None:
    """Write the vLLM-named model ``name`` (version 1) into ``repository``."""
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(CONFIG_PBTXT.format(name=name))


class TritonWithVLLMNamedBackend(TritonServer):
    """A :class:`TritonServer` whose backend directory also has a ``vllm`` Python-based
    backend (:data:`MODEL_PY`)."""

    def _populate_workdir(self, workdir: Path) -> None:
        super()._populate_workdir(workdir)
        backend = workdir / "backends" / "vllm"
        backend.mkdir(parents=True, exist_ok=True)
        (backend / "model.py").write_text(MODEL_PY)
