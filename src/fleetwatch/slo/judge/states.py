"""Judgement: the state of an SLO on a model, and the sentence that explains it.

``regression`` when a band inside the concurrency envelope burns faster than a window
pair's threshold on both its windows (page the owner) — re-judged by
:mod:`fleetwatch.slo.judge.interference` as ``interference`` (a co-located model's load rose:
platform ticket) or ``gpu_degraded`` (the GPU throttles or errors: platform ticket) —,
``overload`` when only bands above the envelope do (scale out), ``ok`` otherwise;
``no_data`` before any event, ``misconfigured`` when the SLI cannot be measured (a
latency threshold that is not a bucket boundary of the source).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from fleetwatch.slo.state import ModelKey, SLOModelState

if TYPE_CHECKING:
    from fleetwatch.slo.account.ledger import Ledger
    from fleetwatch.slo.judge.interference import Attributor

#: Worst first: the state of a model over all its SLOs is the first one present.
SEVERITY = ("regression", "gpu_degraded", "interference", "overload", "misconfigured", "ok",
            "no_data")

#: States whose burns say something about the model's own capacity (capacity at SLO is
#: learned in them; a burn blamed on a neighbour or the GPU is not the model's capacity).
LEARNS_CAPACITY = ("ok", "regression", "overload")


def judge(st: SLOModelState, burning_rows: list[bool]) -> None:
    """Set ``st.state`` and ``st.burning_bands`` from which window-store rows burn
    (``burning_rows[row]``, see :attr:`fleetwatch.slo.account.ledger.Ledger.burning`)."""
    if st.error is not None:
        st.state = "misconfigured"
        return
    if not st.events:
        st.state = "no_data"
        return
    burning = [(b, label) for b, label in st.band_bounds()
               if label in st.rows and burning_rows[st.rows[label]]]
    st.burning_bands = [label for _, label in burning]
    envelope = st.slo.concurrency.envelope
    if any(b <= envelope for b, _ in burning):
        st.state = "regression"
    elif burning:
        st.state = "overload"
    else:
        st.state = "ok"


def judge_marked(ts: float, states: Mapping[tuple[str, ModelKey], SLOModelState],
                 marked: set[tuple[str, ModelKey]], burning_rows: list[bool],
                 attribution: Attributor, ledger: Ledger) -> None:
    """Judge the ``marked`` states (those whose judged inputs changed; a judgement reads
    its own state alone) at ``ts``; with a placement also every placed model's states,
    each then attributed (:mod:`fleetwatch.slo.judge.interference`: regression → interference or
    gpu_degraded), as attribution reads other models."""
    placement = attribution.placement
    if placement:
        for key, st in states.items():
            if key in marked or placement.gpus_of(st.model.model):
                judge(st, burning_rows)
                attribution.attribute(ts, key, st, ledger)
        return
    for key in marked:
        one = states.get(key)
        if one is not None:
            judge(one, burning_rows)


def worst_state(states: set[str]) -> str:
    """The worst of several states (:data:`SEVERITY`); ``no_data`` when empty."""
    return next((s for s in SEVERITY if s in states), "no_data")


def _bands(st: SLOModelState) -> str:
    """The burning bands as words: ``band 16``, ``bands 8, 16``."""
    bands = st.burning_bands
    return f"band{'s' if len(bands) != 1 else ''} {', '.join(bands)}"


def explain(st: SLOModelState) -> str:
    """A sentence saying why the state is what it is."""
    env = format(st.slo.concurrency.envelope, "g")
    if st.state == "misconfigured":
        return st.error or "misconfigured"
    if st.state == "no_data":
        return "no events yet"
    if st.state == "regression":
        return (f"budget burning in {_bands(st)} — inside the "
                f"envelope (≤ {env} concurrent requests per replica): page the owner")
    att = st.attribution
    if st.state == "interference" and att is not None:
        who = "; ".join(
            f"{n.model} (concurrency {n.before:.3g} before, {n.during:.3g} during"
            + (f", r = {n.correlation:.2f}" if n.correlation is not None else "") + ")"
            for n in att.neighbours)
        return (f"budget burning in {_bands(st)} inside the envelope "
                f"(≤ {env}) while co-located {who} got busier on the shared GPU: "
                f"interference, a ticket to the platform team, not a page")
    if st.state == "gpu_degraded" and att is not None:
        gpus = "; ".join(f"{u} ({', '.join(c)})" for u, c in att.gpus.items())
        return (f"budget burning in {_bands(st)} inside the envelope "
                f"(≤ {env}) on a degraded GPU {gpus}: the GPU, not the model — a ticket "
                f"to the platform team")
    if st.state == "overload":
        return (f"budget burning only in {_bands(st)}, above the "
                f"envelope (≤ {env}): scale out, do not page")
    return "no window pair burns faster than its threshold"
