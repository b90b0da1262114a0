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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fleetwatch.slo.state import ModelKey, SLOModelState

if TYPE_CHECKING:
    from fleetwatch.slo.account.ledger import Ledger
    from fleetwatch.slo.judge.interference import Attributor
    from fleetwatch.slo.judge.marks import Marks

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


def judge_changed(ts: float, states: Mapping[tuple[str, ModelKey], SLOModelState],
                  marks: Marks, attribution: Attributor, ledger: Ledger,
                  concurrency: Mapping[ModelKey, float]) -> None:
    """Judge at ``ts`` the states marked since the last judgement and those whose rows'
    burning flags flipped (:class:`~fleetwatch.slo.judge.marks.Marks`), after recording
    each model's ``concurrency`` (requests) for attribution; then clear the marks."""
    now = ledger.burning
    marks.flipped(now)
    attribution.record(ts, states, concurrency)
    judge_marked(ts, states, marks.dirty, now.tolist(), attribution, ledger)
    marks.dirty.clear()


def worst_state(states: set[str]) -> str:
    """The worst of several states (:data:`SEVERITY`); ``no_data`` when empty."""
    return next((s for s in SEVERITY if s in states), "no_data")


#: Prefixes of an NVIDIA GPU's or MIG instance's UUID (``nvidia-smi -L``, dcgm-exporter's
#: ``UUID`` label); any other placement id is a device fleetwatch cannot name the kind of
#: (the demo's ``host-cpu``).
GPU_UUID_PREFIXES = ("GPU-", "MIG-")


def shared_device(devices: Sequence[str]) -> str:
    """How an explanation names the devices two models share: ``the shared GPU GPU-1``,
    ``the shared GPUs GPU-1, GPU-2``, ``the shared device host-cpu`` (an id that is not a
    GPU UUID), ``a shared device`` (none known)."""
    if not devices:
        return "a shared device"
    kind = "GPU" if all(d.startswith(GPU_UUID_PREFIXES) for d in devices) else "device"
    return f"the shared {kind}{'s' if len(devices) > 1 else ''} {', '.join(devices)}"


def band_list(bands: Sequence[str]) -> str:
    """``band 16`` for one band, ``bands 2, 4`` for several (``bands`` for none)."""
    return ("band " if len(bands) == 1 else "bands ") + ", ".join(bands)


def explain(st: SLOModelState) -> str:
    """A sentence saying why the state is what it is."""
    env = format(st.slo.concurrency.envelope, "g")
    if st.state == "misconfigured":
        return st.error or "misconfigured"
    if st.state == "no_data":
        return "no events yet"
    if st.state == "regression":
        return (f"budget burning in {band_list(st.burning_bands)} — inside the "
                f"envelope (≤ {env} concurrent requests per replica): page the owner")
    att = st.attribution
    if st.state == "interference" and att is not None:
        who = "; ".join(
            f"{n.model} (concurrency {n.before:.3g} before, {n.during:.3g} during"
            + (f", r = {n.correlation:.2f}" if n.correlation is not None else "") + ")"
            for n in att.neighbours)
        return (f"budget burning in {band_list(st.burning_bands)} inside the envelope "
                f"(≤ {env}) while co-located {who} got busier on {shared_device(att.devices)}: "
                f"interference, a ticket to the platform team, not a page")
    if st.state == "gpu_degraded" and att is not None:
        gpus = "; ".join(f"{u} ({', '.join(c)})" for u, c in att.gpus.items())
        return (f"budget burning in {band_list(st.burning_bands)} inside the envelope "
                f"(≤ {env}) on a degraded GPU {gpus}: the GPU, not the model — a ticket "
                f"to the platform team")
    if st.state == "overload":
        return (f"budget burning only in {band_list(st.burning_bands)}, above the "
                f"envelope (≤ {env}): scale out, do not page")
    return "no window pair burns faster than its threshold"
