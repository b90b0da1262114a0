"""The input tensors of a Triton request: `InputFactory` builds request ``i``'s tensors,
`infer_inputs` turns them into ``tritonclient`` inputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy.typing as npt

__all__ = ["InputFactory", "infer_inputs"]

#: Builds the input tensors (name → array, batch dimension included) of request number ``i``.
InputFactory = Callable[[int], Mapping[str, npt.NDArray[Any]]]


def infer_inputs(module: Any, tensors: Mapping[str, npt.NDArray[Any]]) -> list[Any]:
    """``module``'s (``tritonclient.http`` or ``tritonclient.grpc``) ``InferInput`` of each
    tensor, its data set from the array."""
    from tritonclient.utils import np_to_triton_dtype

    inputs = []
    for name, array in tensors.items():
        infer_input = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        infer_input.set_data_from_numpy(array)
        inputs.append(infer_input)
    return inputs
