"""Trace readers on the real Azure trace, the mooncake round trip, segments and the
mapping onto one replica."""

from __future__ import annotations

import itertools
import json

import pytest

from fleetwatch.autoscale.trace import (
    Request,
    TraceError,
    TraceMapping,
    map_trace,
    read_azure_csv,
    read_mooncake_jsonl,
    segment,
    write_mooncake_jsonl,
)


def test_azure_trace_has_every_request_over_57_minutes(azure: list[Request]) -> None:
    assert len(azure) == 8819
    assert azure[0].arrival == 0.0
    assert 56 * 60 < azure[-1].arrival < 58 * 60
    assert all(a.arrival <= b.arrival for a, b in itertools.pairwise(azure))
    # the first data row of the file: 2023-11-16 18:17:03.9799600,4808,10
    assert (azure[0].input_tokens, azure[0].output_tokens) == (4808, 10)


def test_azure_reader_names_the_bad_line() -> None:
    good = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,48,10\n"
    assert read_azure_csv(good.splitlines()) == [Request(0.0, 48, 10)]
    with pytest.raises(TraceError, match="line 3: ContextTokens"):
        read_azure_csv((good + "2023-11-16 18:17:04.0,x,1\n").splitlines())
    with pytest.raises(TraceError, match="line 3: TIMESTAMP"):
        read_azure_csv((good + "yesterday,1,1\n").splitlines())
    with pytest.raises(TraceError, match="line 1: header"):
        read_azure_csv(["a,b,c", "1,2,3"])
    with pytest.raises(TraceError, match="line 2: GeneratedTokens -1 is negative"):
        read_azure_csv(["TIMESTAMP,ContextTokens,GeneratedTokens",
                        "2023-11-16 18:17:03.9,1,-1"])


def test_mooncake_round_trip_keeps_arrivals_to_the_millisecond(azure: list[Request]) -> None:
    text = write_mooncake_jsonl(azure[:500])
    first = json.loads(text.splitlines()[0])
    assert set(first) == {"timestamp", "input_length", "output_length"}
    back = read_mooncake_jsonl(text.splitlines())
    assert len(back) == 500
    for a, b in zip(azure[:500], back, strict=True):
        assert abs(a.arrival - b.arrival) <= 0.0005 + 1e-9
        assert (a.input_tokens, max(1, a.output_tokens)) == (b.input_tokens, b.output_tokens)


def test_mooncake_reader_names_the_bad_line() -> None:
    with pytest.raises(TraceError, match="line 2: no output_length"):
        read_mooncake_jsonl(['{"timestamp": 0, "input_length": 1, "output_length": 1}',
                             '{"timestamp": 5, "input_length": 1}'])
    with pytest.raises(TraceError, match="line 1: timestamp"):
        read_mooncake_jsonl(['{"timestamp": "soon", "input_length": 1, "output_length": 1}'])
    with pytest.raises(TraceError, match="line 1: not JSON"):
        read_mooncake_jsonl(["{"])


def test_segment_selects_and_rebases(azure: list[Request]) -> None:
    seg = segment(azure, 600.0, 900.0)
    expected = [r for r in azure if 600.0 <= r.arrival < 1500.0]
    assert len(seg) == len(expected) > 0
    assert seg[0].arrival == pytest.approx(expected[0].arrival - 600.0)
    assert all(0.0 <= r.arrival < 900.0 for r in seg)
    with pytest.raises(ValueError):
        segment(azure, 0.0, 0.0)


def test_mapping_compresses_time_and_scales_and_clamps_tokens() -> None:
    reqs = [Request(0.0, 1000, 10), Request(60.0, 8000, 0), Request(120.0, 3, 400)]
    m = TraceMapping(time_compression=4.0, token_scale=0.1, max_input_tokens=256,
                     min_output_tokens=1, max_output_tokens=32)
    out = map_trace(reqs, m)
    assert [r.arrival for r in out] == [0.0, 15.0, 30.0]
    assert [r.input_tokens for r in out] == [100, 256, 1]
    assert [r.output_tokens for r in out] == [1, 1, 32]
    assert m.seconds(300.0) == 75.0
    with pytest.raises(ValueError, match="time_compression"):
        TraceMapping(time_compression=0.5)
    with pytest.raises(ValueError, match="token_scale"):
        TraceMapping(token_scale=0.0)
    own = map_trace(reqs, TraceMapping(token_scale=0.1, output_token_scale=1.0))
    assert [(r.input_tokens, r.output_tokens) for r in own] == [(100, 10), (800, 1), (1, 400)]
