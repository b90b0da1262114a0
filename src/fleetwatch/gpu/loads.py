"""Footprints measured at load time: the GPU memory in use after a model version appeared
on a GPU minus the memory in use just before (the ``load_delta`` footprint source).

:class:`LoadDeltas` watches successive assessments (placement rows and measured memory in
use per GPU). A ``(model, model_version, gpu_uuid)`` that appears after the first
observation is measured against the memory in use of the observation before it, once it
has been placed for :attr:`LoadDeltas.SETTLE` observations (a model allocates while it
loads; vLLM reserves its whole share at start). Ambiguous cases give no figure: two
versions appearing on one GPU at once, a GPU without a measurement, a delta ≤ 0. Versions
present at the first observation were loaded before anyone watched: no delta. Figures are
forgotten with their placement; at most :attr:`LoadDeltas.MAX` are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleetwatch.gpu.facts import Figure
from fleetwatch.gpu.footprint import Key


class LoadDeltas:
    """See the module docstring; :attr:`deltas` are the measured footprints, bytes."""

    SETTLE = 3
    MAX = 10_000

    def __init__(self) -> None:
        self.deltas: dict[Key, int] = {}
        self._known: set[Key] | None = None
        self._before: dict[str, int] = {}
        self._pending: dict[Key, list[int]] = {}  # key → [used before, observations]

    def observe(self, keys: Iterable[Key], used: Mapping[str, Figure]) -> None:
        """One observation: the placed keys and the measured memory in use per GPU."""
        now = set(keys)
        if self._known is not None:
            new = now - self._known
            per_gpu: dict[str, int] = {}
            for _m, _v, u in new:
                per_gpu[u] = per_gpu.get(u, 0) + 1
            for k in new:
                if per_gpu[k[2]] == 1 and k[2] in self._before \
                        and len(self._pending) < self.MAX:
                    self._pending[k] = [self._before[k[2]], 0]
        for k, state in list(self._pending.items()):
            if k not in now:
                del self._pending[k]
                continue
            state[1] += 1
            if state[1] >= self.SETTLE:
                del self._pending[k]
                if k[2] in used and used[k[2]].bytes > state[0] and len(self.deltas) < self.MAX:
                    self.deltas[k] = used[k[2]].bytes - state[0]
        for k in [k for k in self.deltas if k not in now]:
            del self.deltas[k]
        self._known = now
        self._before = {u: f.bytes for u, f in used.items()}
