"""Refused values in the real vLLM sweep (``tests/data/vllm-sweep/``): they mask their
interval only, never move other values' events into another band or interval.

The committed sweep is replayed twice through the SLO engine: as captured, and with one
histogram's value made invalid in five captures (the TTFT histogram, which the SLO's
events read, or the request-duration histogram, which Little's law reads): its ``_sum``
NaN, its ``_count`` negative, or one of its buckets below the one before it. The
normalizer withdraws a histogram with a refused value, so the decoder sees it go and come
back; per interval the replay with the bad values must book exactly what the clean one
booked (same bands, same events) or, in an interval it counts in
``fleetwatch_slo_intervals_refused_total``, nothing at all.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, SLOReplay
from tests.support.sweep_checks import slo_spec, sweep_slo

SWEEP = ROOT / "tests" / "data" / "vllm-sweep"
#: captures (by position) whose ``_sum`` is turned NaN: one in each load step
BAD = (3, 6, 9, 12, 15)


def _captures() -> list[Path]:
    return sorted((SWEEP / "captures").glob("*.prom"))


def _refused(replay: SLOReplay) -> float:
    return sum(v for name, _labels, v in replay.engine.iter_metrics()
               if name == "fleetwatch_slo_intervals_refused_total")


#: How a value is made invalid: (regular expression of the line, its replacement)
BREAK = {
    "nan_sum": (r"^({family}_sum\{{[^}}]*\}}) \S+$", r"\1 NaN"),
    "negative_count": (r"^({family}_count\{{[^}}]*\}}) \S+$", r"\1 -1"),
    # the first (lowest) bucket's count above +Inf's: the buckets decrease as le grows
    "decreasing_bucket": (r"^({family}_bucket\{{[^}}]*\}}) \S+$", r"\1 1e9"),
}


def _per_interval(family: str | None, how: str = "nan_sum"
                  ) -> tuple[list[dict[str, float]], list[bool]]:
    """Per interval of the replay the events booked per band (``all`` left out) and
    whether the engine counted a refused interval; ``family``: the vLLM histogram made
    invalid in the :data:`BAD` captures as :data:`BREAK` ``[how]`` says (None: the sweep
    as captured)."""
    slo = sweep_slo(SWEEP)
    assert slo is not None
    replay = SLOReplay(slo_spec(8, slo))
    booked: list[dict[str, float]] = []
    refused: list[bool] = []
    before: dict[str, float] = {}
    for i, path in enumerate(_captures()):
        text = path.read_text(encoding="utf-8")
        if family is not None and i in BAD:
            pattern, replacement = BREAK[how]
            text, n = re.subn(pattern.format(family=re.escape(family)), replacement, text,
                              count=1, flags=re.M)
            assert n == 1
        n_refused = _refused(replay)
        replay.feed(int(path.stem.split("-")[1]) / 1000, text)
        now = {band: state.events[band] for state in replay.engine.states.values()
               for band in state.rows if band != "all"}  # one state: the sweep's SLO
        if i:
            booked.append({b: now[b] - before.get(b, 0.0) for b in now
                           if now[b] != before.get(b, 0.0)})
            refused.append(_refused(replay) > n_refused)
        before = now
    return booked, refused


@pytest.mark.parametrize("how", sorted(BREAK))
@pytest.mark.parametrize("family", ["vllm:time_to_first_token_seconds",
                                    "vllm:e2e_request_latency_seconds"])
def test_a_bad_value_masks_its_interval_and_moves_no_events(family, how):
    clean, clean_refused = _per_interval(None)
    bad, refused = _per_interval(family, how)
    assert not any(clean_refused)
    for i, (want, got, was_refused) in enumerate(zip(clean, bad, refused, strict=True)):
        if was_refused:
            assert got == {}, f"interval {i + 1} was refused but booked {got}"
        else:
            assert got == want, f"interval {i + 1}: {got}, the clean replay {want}"
    # the interval of each bad value is refused, and the one its histogram returns in
    # (its delta spans two intervals); no other
    assert [i + 1 for i, r in enumerate(refused) if r] == sorted(
        {*BAD, *(b + 1 for b in BAD)})
    # most of the sweep is still booked, in the bands the clean replay booked it in
    kept = sum(sum(b.values()) for b in bad)
    assert kept > sum(sum(b.values()) for b in clean) / 2
