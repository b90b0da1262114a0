"""What a shadow comparison adds to a normal one: how much of the traffic the mirror
delivered.

In shadow mode (``fleetwatch compare --shadow``) the candidate receives a mirrored copy of
the baseline's requests (a proxy's mirror, e.g. nginx ``mirror``) and its responses are
discarded. The comparison itself is the normal one — same bands, same test, same verdicts
(:mod:`fleetwatch.rollout.compare`) — on these assumptions: the copy has the baseline's
request mix and arrival times, so each concurrency band holds like requests on both sides;
the candidate runs on its own replicas (a copy that shares the baseline's doubles the load
of both); clients never see the candidate's answers, so retries and timeouts do not react
to it. What can differ is coverage: a mirror may drop copies (a proxy under pressure, a
sampled mirror), so :func:`coverage` gives, per SLO, the candidate's events as a share of
the baseline's (band ``all``). A share far below 1 means the mirror lost requests and the
candidate's bands are thinner than the baseline's; far above 1, that the candidate also
serves other traffic, which is then no shadow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleetwatch.rollout.summary import SLOSummary
from fleetwatch.slo.state import ALL

__all__ = ["Coverage", "coverage", "render"]


@dataclass(frozen=True, slots=True)
class Coverage:
    """One SLO's events on each side (band ``all``, SLI events) and the candidate's share
    of the baseline's (None when the baseline has none)."""

    slo: str
    baseline_events: float
    candidate_events: float

    @property
    def share(self) -> float | None:
        """candidate ÷ baseline events (None without baseline events)."""
        if self.baseline_events <= 0:
            return None
        return self.candidate_events / self.baseline_events


def _all_events(s: SLOSummary) -> float:
    if ALL in s.bands:
        return s.bands[ALL].total
    return sum(b.total for b in s.bands.values())


def coverage(baseline: Sequence[SLOSummary], candidate: Sequence[SLOSummary]
             ) -> list[Coverage]:
    """Per SLO both sides have, the mirror's coverage (sorted by SLO)."""
    base = {s.slo: s for s in baseline}
    return [Coverage(c.slo, _all_events(base[c.slo]), _all_events(c))
            for c in sorted(candidate, key=lambda s: s.slo) if c.slo in base]


def render(cov: Sequence[Coverage]) -> str:
    """The lines ``compare --shadow`` adds below the comparison."""
    out = ["shadow: the candidate served a mirrored copy of the baseline's requests "
           "(its responses discarded)"]
    for c in cov:
        share = "-" if c.share is None else f"{100 * c.share:.0f}%"
        out.append(f"  {c.slo}: {c.candidate_events:.0f} mirrored events against "
                   f"{c.baseline_events:.0f} served: coverage {share}")
    return "\n".join(out)
