"""The LLM-shaped replica's scheduler (benchmarks/autoscale/llm_engine.py): its calibration
on the committed real-vLLM sweep and the invariants of continuous batching."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from benchmarks.autoscale.calibrate import TOLERANCE, compare, sweep_levels
from benchmarks.autoscale.llm_engine import (
    CALIBRATED,
    Engine,
    EngineConfig,
    Request,
    Shape,
    simulate_closed_loop,
)


def test_calibrated_ttft_curve_matches_the_real_vllm_sweep_at_every_level() -> None:
    levels = sweep_levels()
    assert [level.concurrency for level in levels] == [1, 2, 4, 8, 16]
    for c in compare(CALIBRATED, levels):
        assert c.error <= TOLERANCE, (
            f"at {c.concurrency} concurrent: model {c.model_ttft_s * 1e3:.1f} ms, "
            f"sweep {c.sweep_ttft_s * 1e3:.1f} ms")


def test_an_uncalibrated_engine_misses_the_sweep() -> None:
    """The comparison can fail: half the step time is far from the real curve."""
    slow = replace(CALIBRATED, step_base_s=CALIBRATED.step_base_s * 2,
                   step_per_seq_s=CALIBRATED.step_per_seq_s * 2)
    assert max(c.error for c in compare(slow, sweep_levels())) > TOLERANCE


def test_ttft_grows_past_the_slot_limit() -> None:
    shapes = [Shape(35, 16)]
    below = simulate_closed_loop(CALIBRATED, shapes, CALIBRATED.max_num_seqs // 2, 200)
    above = simulate_closed_loop(CALIBRATED, shapes, CALIBRATED.max_num_seqs * 2, 200)
    assert above.mean_ttft_s > 3 * below.mean_ttft_s


def test_step_time_grows_with_batch_and_prefill() -> None:
    config = CALIBRATED
    assert config.step_duration_s(2, 0) > config.step_duration_s(1, 0)
    assert config.step_duration_s(1, 100) > config.step_duration_s(1, 10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batch_and_kv_budget_are_never_exceeded_and_every_token_is_delivered(seed: int) -> None:
    rng = random.Random(seed)
    config = EngineConfig(max_num_seqs=4, kv_blocks=10, block_size=8)
    engine = Engine(config)
    requests = [Request(i, rng.randint(1, 40), rng.randint(1, 30), 0.0) for i in range(40)]
    tokens = dict.fromkeys(range(40), 0)
    for request in requests:
        engine.add(request)
    now, steps = 0.0, 0
    while engine.busy:
        step = engine.step(now)
        now += step.duration_s
        steps += 1
        assert step.batch <= config.max_num_seqs
        assert 0 <= engine.free_blocks <= config.kv_blocks
        assert sum(r.blocks for r in engine.running) + engine.free_blocks == config.kv_blocks
        for request in step.tokens:
            tokens[request.request_id] += 1
        assert steps < 10_000
    assert all(r.finished_s is not None for r in requests)
    assert all(tokens[r.request_id] == r.generated == r.output_tokens for r in requests)
    assert any(r.preemptions for r in requests)  # the small budget forced preemptions


def test_every_token_is_its_own_response_by_default() -> None:
    assert CALIBRATED.stream_interval == 1
    assert CALIBRATED.chunk_sizes(5) == [1, 1, 1, 1, 1]


@pytest.mark.parametrize(("interval", "tokens", "chunks"), [
    (8, 16, [1, 8, 7]), (8, 9, [1, 8]), (8, 48, [1, 8, 8, 8, 8, 8, 7]), (10, 3, [1, 2]),
    (8, 1, [1])])
def test_stream_interval_sends_the_first_token_alone_then_chunks_and_the_rest_at_the_end(
        interval: int, tokens: int, chunks: list[int]) -> None:
    """vLLM's --stream-interval rule: first token at once, then every `interval` tokens,
    the remainder when the request finishes; no token lost or sent twice."""
    config = replace(CALIBRATED, stream_interval=interval)
    assert config.chunk_sizes(tokens) == chunks
    assert sum(chunks) == tokens


def test_stream_interval_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="stream_interval"):
        EngineConfig(stream_interval=0)
