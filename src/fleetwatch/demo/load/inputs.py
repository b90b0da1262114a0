"""Input tensors of the demo models: an
:data:`~fleetwatch.clients.triton.tensors.InputFactory` per model (it builds the tensors —
name → array, batch dimension included — of request number ``i``); `default_inputs` names
each demo model's default.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from fleetwatch.clients.triton.tensors import InputFactory

__all__ = [
    "default_inputs",
    "faulty_inputs",
    "faulty_is_negative",
    "ranker_inputs",
    "slo_sim_inputs",
    "streamer_inputs",
]


def ranker_inputs(index: int) -> dict[str, npt.NDArray[Any]]:
    """``ranker``: one row of 4 FP32 features (shape [1, 4]), deterministic in ``index``."""
    row = np.array([index % 7, index % 5, index % 3, 1.0], dtype=np.float32) / 7.0
    return {"INPUT0": row.reshape(1, 4)}


def faulty_inputs(negative_fraction: float = 0.0, length: int = 4) -> InputFactory:
    """``faulty``: FP32 vectors of ``length`` values; a ``negative_fraction`` of them fail.

    Request ``i`` starts with a negative value (so ``faulty`` raises) exactly when
    ``floor((i + 1) * f) > floor(i * f)``: among requests ``0 .. n-1`` exactly ``floor(n * f)``
    fail, spread evenly. ``f = 0`` never fails, ``f = 1`` always does.

    Raises:
        ValueError: ``negative_fraction`` is outside [0, 1] or ``length`` < 1.
    """
    if not 0.0 <= negative_fraction <= 1.0:
        raise ValueError(f"negative_fraction must be in [0, 1], got {negative_fraction}")
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")

    def make(index: int) -> dict[str, npt.NDArray[Any]]:
        values = np.arange(1, length + 1, dtype=np.float32)
        if faulty_is_negative(index, negative_fraction):
            values[0] = -1.0
        return {"INPUT0": values}

    return make


def faulty_is_negative(index: int, negative_fraction: float) -> bool:
    """Whether `faulty_inputs` (with this fraction) makes request ``index`` fail."""
    return math.floor((index + 1) * negative_fraction) > math.floor(index * negative_fraction)


def streamer_inputs(responses: int = 8) -> InputFactory:
    """``streamer``: ask for ``responses`` streamed responses (INT32 ``N``, shape [1]).

    The model caps ``N`` at 64.
    """

    def make(index: int) -> dict[str, npt.NDArray[Any]]:
        return {"N": np.array([responses], dtype=np.int32)}

    return make


def slo_sim_inputs(index: int) -> dict[str, npt.NDArray[Any]]:
    """``slo_sim``: 4 FP32 values ``X`` and the send time ``T0`` (INT64 ns since the epoch).

    ``T0`` is ``time.time_ns()`` when the factory is called, i.e. just before the request is
    sent; the model observes ``now - T0`` as the request's end-to-end latency, queueing included.
    """
    values = np.array([index % 7, 1.0, 2.0, 3.0], dtype=np.float32)
    return {"X": values, "T0": np.array([time.time_ns()], dtype=np.int64)}


def default_inputs(model: str) -> InputFactory:
    """The default input factory of a demo model (``faulty``: never negative).

    Raises:
        ValueError: ``model`` is not a demo model.
    """
    factories: dict[str, InputFactory] = {
        "ranker": ranker_inputs,
        "faulty": faulty_inputs(0.0),
        "streamer": streamer_inputs(8),
        "slo_sim": slo_sim_inputs,
    }
    try:
        return factories[model]
    except KeyError:
        raise ValueError(f"no default inputs for model {model!r}; pass inputs=") from None
