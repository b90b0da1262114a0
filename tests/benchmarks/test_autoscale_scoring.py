"""The live experiment's scoring (benchmarks/autoscale/run.py): what the result table says
is computed from the client's records and the scaler's samples alone."""

from __future__ import annotations

import json

import pytest
from benchmarks.autoscale.load import read_records
from benchmarks.autoscale.run import (
    TTFT_SLO_S,
    Sample,
    _recovery,
    _reversals,
    attainment_windows,
    summarize,
)

from fleetwatch.autoscale.trace import Request


def _record_line(start_ns: int, ttft_ms: float | None, gaps_ms: list[float],
                 error: str | None = None) -> str:
    metrics = {} if ttft_ms is None else {
        "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
        "inter_chunk_latency": {"value": gaps_ms, "unit": "ms"},
        "request_latency": {"value": ttft_ms + sum(gaps_ms), "unit": "ms"},
        "output_sequence_length": {"value": len(gaps_ms) + 1, "unit": "tokens"}}
    row = {"metadata": {"request_start_ns": start_ns, "x_request_id": str(start_ns)},
           "metrics": metrics, "error": {"type": "HTTPError", "message": error} if error else None}
    return json.dumps(row)


def test_records_and_scores_from_aiperf_export(tmp_path) -> None:
    lines = [
        _record_line(1_000_000_000, 50.0, [10.0, 10.0]),       # good
        _record_line(2_000_000_000, 50.0, [40.0, 40.0]),       # TTFT met, ITL missed
        _record_line(3_000_000_000, 150.0, [10.0]),            # TTFT missed
        _record_line(4_000_000_000, None, [], error="503"),    # failed
    ]
    (tmp_path / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    records = read_records(tmp_path)
    assert [r.ttft_s for r in records] == [0.05, 0.05, 0.15, None]
    assert records[3].error == "503"
    sent = [Request(float(i), 10, 10) for i in range(5)]  # one request never recorded
    samples = [Sample(0, 1, 1, 0.5, 1), Sample(3, 1, 1, 3.0, 3), Sample(6, 3, 3, 0.5, 3),
               Sample(9, 3, 3, 0.5, 1)]
    result = summarize("p", sent, records, samples, 40.0, 80.0, 60.0, 10.0)
    assert result.requests == 5 and result.answered == 3
    assert result.errors == 1 and result.dropped == 1
    assert result.ttft_attainment == pytest.approx(2 / 5)
    assert result.goodput == pytest.approx(1 / 5)
    assert result.ratio_to_static == pytest.approx(0.5)
    assert result.scale_events == 2 and result.reversals == 1 and result.peak_replicas == 3
    assert 0.05 <= TTFT_SLO_S < 0.15  # the records above straddle the SLO


def test_reversals_count_only_direction_changes_inside_the_window() -> None:
    up_down = [Sample(0, 1, 1, 0, 1), Sample(1, 1, 1, 0, 2), Sample(2, 2, 2, 0, 1)]
    assert _reversals(up_down, 5.0) == 1
    assert _reversals(up_down, 0.5) == 0
    up_up = [Sample(0, 1, 1, 0, 1), Sample(1, 1, 1, 0, 2), Sample(2, 2, 2, 0, 3)]
    assert _reversals(up_up, 5.0) == 0


def test_recovery_is_measured_from_the_busiest_window() -> None:
    windows = [(0.0, 10, 1.0), (5.0, 90, 0.2), (10.0, 50, 0.5), (15.0, 20, 0.995)]
    assert _recovery(windows) == 10.0
    assert _recovery([(0.0, 10, 0.5)]) is None
    assert _recovery([]) is None


def test_attainment_windows_group_by_request_start(tmp_path) -> None:
    lines = [_record_line(int(t * 1e9), ms, [5.0]) for t, ms in
             [(100.0, 50.0), (101.0, 200.0), (106.0, 50.0)]]
    (tmp_path / "profile_export.jsonl").write_text("\n".join(lines))
    windows = attainment_windows(read_records(tmp_path), 100.0)
    assert windows == [(0.0, 2, 0.5), (5.0, 1, 1.0)]


def test_the_windows_are_parameters_of_the_run() -> None:
    """The full experiment's windows by default; shorter ones shorten the run's tail by
    their compressed difference and reach the HPA and the sidecars' SLO file."""
    from benchmarks.autoscale.run import MAPPING, Experiment, sidecar_slos

    from fleetwatch.autoscale.hpa import DEFAULT_BEHAVIOR
    from fleetwatch.slo.spec import parse_slo_file

    full = Experiment((), MAPPING, 150.0)
    short = Experiment((), MAPPING, 150.0, scale_down_window_s=60.0, headroom_window_s=30.0)
    assert full.behavior == DEFAULT_BEHAVIOR
    assert short.behavior.scale_down.stabilization_window_seconds == 60.0
    assert short.behavior.scale_up == DEFAULT_BEHAVIOR.scale_up
    c = MAPPING.time_compression
    assert full.run_s - short.run_s == pytest.approx((300.0 - 60.0) / c + (300.0 - 30.0) / c)
    # the tail follows the last answer when a busy fleet answered after the segment
    segment = 150.0 / c
    assert short.ends_s(segment / 2) == pytest.approx(short.run_s)
    assert short.ends_s(segment + 20.0) == pytest.approx(short.run_s + 20.0)
    settings = parse_slo_file(sidecar_slos(30.0 / c)).autoscaling
    assert settings.headroom_window == pytest.approx(30.0 / c)
