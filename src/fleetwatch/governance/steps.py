"""Which step of a rollout a model is at, and whether the gate to the next step passes.

The steps of a new serving path, in order (:data:`STEPS`):

1. ``loaded`` — the candidate version is loaded and receives no traffic;
2. ``shadow`` — it receives a mirrored copy of the requests (a proxy's mirror, e.g.
   nginx ``mirror``), its responses discarded;
3. ``canary`` — it receives a share of the real requests (:attr:`Step.share`);
4. ``full`` — it receives all of them; the baseline is still loaded, without traffic;
5. ``old removed`` — the baseline is gone.

The step is read from what Prometheus sees over a range: each version's request rate
(``modelserver_requests_total``, req/s) and whether it has series at all
(:class:`VersionTraffic`). A mirrored copy and a real share of the traffic look the same
to Prometheus — both are requests the candidate served — so the rollout says which one it
runs (``shadow``); with traffic on both versions the step is ``shadow`` when declared so,
else ``canary`` with the candidate's share of the two rates.

The **gate** to the next step (:func:`gate`):

* into ``shadow``, ``canary``, ``full``: the candidate is not worse than the baseline in
  any concurrency band with enough data (:mod:`fleetwatch.rollout.compare`), and at least
  one band has enough data (before the candidate served anything, nothing is known: to
  step into ``shadow`` only the memory plan counts); the memory plan of both versions
  loaded fits (:mod:`fleetwatch.gpu.plan`), when one was computed;
* into ``old removed``: the baseline receives no traffic (true at ``full``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwatch.rollout.compare import NO_DATA, WORSE, Comparison

__all__ = ["CANARY", "FULL", "LOADED", "OLD_REMOVED", "SHADOW", "STEPS", "Gate", "Step",
           "VersionTraffic", "gate", "step"]

LOADED, SHADOW, CANARY, FULL, OLD_REMOVED = "loaded", "shadow", "canary", "full", "old removed"
#: The steps in order.
STEPS = (LOADED, SHADOW, CANARY, FULL, OLD_REMOVED)


class StepError(ValueError):
    """The traffic seen fits no step (e.g. neither version has series)."""


@dataclass(frozen=True, slots=True)
class VersionTraffic:
    """One version as Prometheus sees it over the range: its request ``rate`` (req/s,
    ≥ 0), None when it has no series at all (not loaded, or not scraped)."""

    version: str
    rate: float | None

    @property
    def present(self) -> bool:
        """True when the version has series."""
        return self.rate is not None

    @property
    def serving(self) -> bool:
        """True when it received requests over the range."""
        return self.rate is not None and self.rate > 0


@dataclass(frozen=True, slots=True)
class Step:
    """The step (one of :data:`STEPS`), the candidate's ``share`` of the real requests
    (0–1; None at ``shadow``, where its requests are copies) and the next step (None at
    the last)."""

    name: str
    share: float | None

    @property
    def next(self) -> str | None:
        """The step after this one (None after ``old removed``)."""
        i = STEPS.index(self.name)
        return STEPS[i + 1] if i + 1 < len(STEPS) else None


def step(baseline: VersionTraffic, candidate: VersionTraffic, shadow: bool) -> Step:
    """The step of the module doc; raises :class:`StepError` when the candidate has no
    series (the rollout has not begun: nothing to say) or no version serves."""
    if not candidate.present:
        raise StepError(f"version {candidate.version!r} has no series: it is not loaded "
                        "(or no sidecar scrapes it)")
    if not baseline.present:
        return Step(OLD_REMOVED, 1.0)
    if not candidate.serving:
        return Step(LOADED, 0.0)
    if not baseline.serving:
        return Step(FULL, 1.0)
    if shadow:
        return Step(SHADOW, None)
    assert baseline.rate is not None and candidate.rate is not None
    return Step(CANARY, candidate.rate / (candidate.rate + baseline.rate))


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether the gate into ``to`` passes, and why (one line per condition checked)."""

    to: str | None
    passes: bool
    reasons: tuple[str, ...]


def gate(at: Step, comparison: Comparison | None, plan_fits: bool | None) -> Gate:
    """The gate from ``at`` to its next step (module doc). ``comparison``: the candidate
    against the baseline (None when it could not be made: no band has data); ``plan_fits``:
    the memory plan's verdict (None: not computed)."""
    to = at.next
    if to is None:
        return Gate(None, True, ("the rollout is complete",))
    if to == OLD_REMOVED:
        return Gate(to, True, ("the baseline receives no traffic",))
    reasons: list[str] = []
    ok = True
    if plan_fits is not None:
        ok &= plan_fits
        reasons.append("memory plan: " + ("fits" if plan_fits else "does NOT fit"))
    if at.name != LOADED:
        if comparison is None or comparison.verdict == NO_DATA:
            ok = False
            reasons.append("comparison: not enough data in any band")
        else:
            bands = ", ".join(f"{s} band {b}" for s, b in comparison.driving)
            not_worse = comparison.verdict != WORSE
            ok &= not_worse
            reasons.append(f"comparison: {comparison.verdict} ({bands})" if bands
                           else f"comparison: {comparison.verdict}")
    elif plan_fits is None:
        reasons.append("nothing to check before the first mirrored request")
    return Gate(to, ok, tuple(reasons))
