"""Cold starts from the readiness transitions the sidecar already sees.

A model's cold start is the time from the moment it (or its whole target) is seen *not
ready* — the readiness probe answers not ready, or the target does not answer at all —
to the first scrape at which it is ready again (Triton ``/v2/models/<m>/ready``, vLLM
``/health``). Resolution is the scrape interval; a model already loading before the
sidecar first saw it is measured from that first observation (a lower bound). The last
measurement per (target, model) is exported as ``fleetwatch_model_cold_start_seconds``
and handed to the SLO engine, whose ``/autoscaling`` recommends a larger replica floor
for models whose cold start exceeds ``autoscaling.cold_start_bound_seconds``.

What it holds is bounded by what the targets serve: when a target answers, the models it
no longer has (neither probed nor configured) are forgotten — a model that was unloaded,
or one of a churning upstream's names, never comes back as a measurement or as a start
still pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class ColdStarts:
    """Not-ready → ready durations per (target, model), in seconds."""

    def __init__(self) -> None:
        self.not_ready_since: dict[tuple[str, str], float] = {}
        self.seconds: dict[tuple[str, str], float] = {}

    def observe(self, target: str, up: bool, models_ready: Mapping[str, bool],
                known: Iterable[str], now: float) -> None:
        """One scrape of ``target`` at ``now`` (Unix seconds): ``up`` whether it answered,
        ``models_ready`` its probes' answers, ``known`` models configured or seen before
        (not ready while the target is down)."""
        current = set(models_ready) | set(known)
        for model in current:
            key = (target, model)
            if up and models_ready.get(model, False):
                since = self.not_ready_since.pop(key, None)
                if since is not None:
                    self.seconds[key] = now - since
            else:
                self.not_ready_since.setdefault(key, now)
        if up:
            for held in (self.not_ready_since, self.seconds):
                for key in [k for k in held if k[0] == target and k[1] not in current]:
                    del held[key]

    def by_model(self) -> dict[str, float]:
        """Model name → the longest last cold start over its targets (seconds)."""
        out: dict[str, float] = {}
        for (_, model), s in self.seconds.items():
            out[model] = max(out.get(model, 0.0), s)
        return out
