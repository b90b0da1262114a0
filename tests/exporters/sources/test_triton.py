"""Triton core: the ``nv_inference_*_duration_histogram_us`` families are real latency
distributions and win over the mean-only form built from the ``*_duration_us`` counters;
a server without them keeps the mean form."""

from __future__ import annotations

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import SOURCES_BY_KIND, detect_kind

_M = 'model="m",version="1"'
_OUT = 'model="m",model_version="1",backend="triton",runtime="unknown"'

# Means: 3 successes, 0.6 s of request time and 0.03 s of queue time in total.
_COUNTERS = f"""# TYPE nv_inference_request_success counter
nv_inference_request_success{{{_M}}} 3
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{{{_M}}} 600000
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{{{_M}}} 30000
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{{{_M}}} 500000
"""


def _hist(phase: str, bounds_us: tuple[int, ...], cumulative: tuple[int, ...],
          sum_us: int) -> str:
    name = f"nv_inference_{phase}_duration_histogram_us"
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{_M},le="{b}"}} {c}' for b, c in zip(bounds_us, cumulative, strict=True)]
    lines += [f'{name}_bucket{{{_M},le="+Inf"}} {cumulative[-1]}',
              f"{name}_sum{{{_M}}} {sum_us}", f"{name}_count{{{_M}}} {cumulative[-1]}"]
    return "\n".join(lines) + "\n"


# The histograms count 4 requests (a failed one too): their figures differ from the means'.
_HISTOGRAMS = (_hist("request", (1000, 100000, 1000000), (0, 1, 4), 800000)
               + _hist("queue", (100, 1000, 50000), (1, 2, 4), 40000)
               + _hist("compute_infer", (1000, 100000, 1000000), (0, 2, 4), 700000))


def _samples(text: str) -> dict[str, float]:
    assert detect_kind(text) == "triton"
    out = render([Normalizer(SOURCES_BY_KIND["triton"].table).normalize(text)])
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in out.splitlines() if line and not line.startswith("#")}


def test_duration_histograms_are_mapped_with_their_buckets_in_seconds():
    got = _samples(_COUNTERS + _HISTOGRAMS)
    req = "modelserver_request_duration_seconds"
    assert got[f'{req}_bucket{{{_OUT},le="0.001"}}'] == 0
    assert got[f'{req}_bucket{{{_OUT},le="0.1"}}'] == 1
    assert got[f'{req}_bucket{{{_OUT},le="1.0"}}'] == 4
    assert got[f'{req}_bucket{{{_OUT},le="+Inf"}}'] == 4
    assert got[f"{req}_count{{{_OUT}}}"] == 4
    assert got[f"{req}_sum{{{_OUT}}}"] == pytest.approx(0.8)
    queue = "modelserver_queue_duration_seconds"
    assert got[f'{queue}_bucket{{{_OUT},le="0.0001"}}'] == 1
    assert got[f"{queue}_count{{{_OUT}}}"] == 4
    assert got[f"{queue}_sum{{{_OUT}}}"] == pytest.approx(0.04)
    phase = f'modelserver_phase_duration_seconds_bucket{{{_OUT},phase="compute_infer"'
    assert got[f'{phase},le="0.1"}}'] == 2


@pytest.mark.parametrize("family", ["modelserver_request_duration_seconds",
                                    "modelserver_queue_duration_seconds"])
def test_the_histogram_wins_over_the_mean_form_whole(family):
    """Every sample of the family comes from the histogram: its count, sum and +Inf
    bucket, not the success counter's and the µs counter's (no mixed family)."""
    got = _samples(_COUNTERS + _HISTOGRAMS)
    assert got[f"{family}_count{{{_OUT}}}"] == 4
    assert got[f'{family}_bucket{{{_OUT},le="+Inf"}}'] == 4


def test_without_histograms_the_mean_form_stays():
    got = _samples(_COUNTERS)
    req = "modelserver_request_duration_seconds"
    buckets = [k for k in got if k.startswith(f"{req}_bucket")]
    assert buckets == [f'{req}_bucket{{{_OUT},le="+Inf"}}']
    assert got[f"{req}_count{{{_OUT}}}"] == 3
    assert got[f"{req}_sum{{{_OUT}}}"] == pytest.approx(0.6)
