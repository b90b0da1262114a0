"""The numpy array types the SLO engine's stages pass each other (one definition)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Floats (seconds, counts, ratios, requests: each use names its unit).
FloatArray = npt.NDArray[np.float64]
#: Indexes (slots, rows, positions).
IntArray = npt.NDArray[np.int64]
#: Masks.
BoolArray = npt.NDArray[np.bool_]
