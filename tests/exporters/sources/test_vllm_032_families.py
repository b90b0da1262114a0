"""vLLM 0.32 families mapped here: speculative decoding and the NIXL KV-transfer time.

Speculative decoding on the real vLLM 0.32 engine's capture (n-gram drafts, 3 tokens):
the normalized counters equal the upstream ones, read by prometheus_client's parser, and
keep their arithmetic (accepted ≤ drafted ≤ drafts × tokens per draft, positions sum to
the accepted total)."""

from __future__ import annotations

from tests.support.helpers import FIXTURES, normalized_samples, pick, upstream_samples

CAPTURE = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-lora-specdecode-under-load.prom"
NUM_SPECULATIVE_TOKENS = 3  # --speculative-config of the capture


def test_spec_decode_counters_map_one_to_one():
    text = CAPTURE.read_text(encoding="utf-8")
    up, out = upstream_samples(text), normalized_samples(text)
    pairs = {
        "vllm:spec_decode_num_drafts_total": "modelserver_spec_decode_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total": "modelserver_spec_decode_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total":
            "modelserver_spec_decode_accepted_tokens_total",
    }
    for upstream, normalized in pairs.items():
        want = pick(up, upstream, model_name="tiny-llm", engine="0")
        assert want > 0, upstream
        assert pick(out, normalized, model="tiny-llm", dp_rank="0") == want, normalized
    positions = {lab["position"] for n, lab, _ in up
                 if n == "vllm:spec_decode_num_accepted_tokens_per_pos_total"}
    assert len(positions) == NUM_SPECULATIVE_TOKENS
    for pos in positions:
        assert pick(out, "modelserver_spec_decode_accepted_tokens_by_position_total",
                    draft_position=pos) == pick(
            up, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=pos)


def test_spec_decode_arithmetic_holds_after_normalization():
    out = normalized_samples(CAPTURE.read_text(encoding="utf-8"))
    drafts = pick(out, "modelserver_spec_decode_drafts_total")
    drafted = pick(out, "modelserver_spec_decode_draft_tokens_total")
    accepted = pick(out, "modelserver_spec_decode_accepted_tokens_total")
    by_pos = [pick(out, "modelserver_spec_decode_accepted_tokens_by_position_total",
                   draft_position=str(k)) for k in range(NUM_SPECULATIVE_TOKENS)]
    assert 0 < accepted <= drafted <= drafts * NUM_SPECULATIVE_TOKENS
    assert sum(by_pos) == accepted
    # a token at position k is accepted only when every earlier one was
    assert by_pos == sorted(by_pos, reverse=True)
    assert all(p <= drafts for p in by_pos)


def test_nixl_transfer_time_sum_is_the_kv_transfer_duration():
    """vLLM's NIXL connector (P/D disaggregation) observes each KV transfer's seconds: the
    histogram's _sum is the time spent transferring; its buckets and count are left out
    with a reason (transfers, not requests)."""
    from fleetwatch.exporters.sources import SOURCES_BY_KIND
    from tests.support.helpers import normalize

    text = "\n".join([
        "# TYPE vllm:nixl_xfer_time_seconds histogram",
        'vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.01",model_name="m"} 3.0',
        'vllm:nixl_xfer_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0',
        'vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 4.0',
        'vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 0.125',
        "",
    ])
    out = normalized_samples(text)
    assert pick(out, "modelserver_kv_transfer_duration_seconds_total", model="m",
                dp_rank="0") == 0.125
    assert pick(out, "modelserver_kv_transfers_total") == 0.0
    assert "transfers, not" in (SOURCES_BY_KIND["vllm"].why_not_mapped(
        "vllm:nixl_xfer_time_seconds") or "")
    assert normalize(text, "vllm").unmapped <= {"vllm:nixl_xfer_time_seconds"}
