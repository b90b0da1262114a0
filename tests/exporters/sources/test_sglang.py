"""The SGLang source: exposition text in, exact normalized text out (kube-state-metrics
``internal/store/*_test.go`` style: one literal case per concern)."""

from __future__ import annotations

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import SOURCES_BY_KIND, detect_kind

CASES = [
    pytest.param(
        """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 2
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0"} 0.25
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m",tp_rank="0"} 0.5
""",
        """# HELP modelserver_requests_active [STABLE] Requests inside the server now: running (in a batch) or waiting (queued).
# TYPE modelserver_requests_active gauge
modelserver_requests_active{model="m",backend="sglang",runtime="sglang",state="running"} 3
modelserver_requests_active{model="m",backend="sglang",runtime="sglang",state="waiting"} 2
# HELP modelserver_kv_cache_usage_ratio [STABLE] Fraction of KV-cache blocks in use, 0–1.
# TYPE modelserver_kv_cache_usage_ratio gauge
modelserver_kv_cache_usage_ratio{model="m",backend="sglang",runtime="sglang"} 0.25
# HELP modelserver_prefix_cache_hit_ratio [BETA] Prefix-cache hit ratio as the engine reports it, over the engine's own recent window (a gauge, for engines that export no hit/query counters, e.g. vLLM V0). NaN when the engine reports no data.
# TYPE modelserver_prefix_cache_hit_ratio gauge
modelserver_prefix_cache_hit_ratio{model="m",backend="sglang",runtime="sglang"} 0.5
""", id="state gauges; the hit rate is a gauge, not counters"),
    pytest.param(
        """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 10
sglang:prompt_tokens_created{model_name="m"} 1.7e9
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 40
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m",cache_source="device"} 4
sglang:cached_tokens_total{model_name="m",cache_source="host"} 2
""",
        """# HELP modelserver_tokens_total [STABLE] Tokens processed; tokens/s is its rate().
# TYPE modelserver_tokens_total counter
modelserver_tokens_total{model="m",backend="sglang",runtime="sglang",token_type="input"} 10
modelserver_tokens_total{model="m",backend="sglang",runtime="sglang",token_type="output"} 40
# HELP modelserver_prefix_cache_queries_total [STABLE] Prefix-cache lookups, counted in tokens.
# TYPE modelserver_prefix_cache_queries_total counter
modelserver_prefix_cache_queries_total{model="m",backend="sglang",runtime="sglang",cache_tier="local"} 10
# HELP modelserver_prefix_cache_hits_total [STABLE] Prefix-cache hits, counted in tokens; hit ratio = rate(hits)/rate(queries).
# TYPE modelserver_prefix_cache_hits_total counter
modelserver_prefix_cache_hits_total{model="m",backend="sglang",runtime="sglang",cache_tier="local"} 6.0
""", id="token counters; cache sources summed; _created is no data"),
    pytest.param(
        """# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m",is_streaming="true"} 1
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m",is_streaming="true"} 2
sglang:time_to_first_token_seconds_count{model_name="m",is_streaming="true"} 2
sglang:time_to_first_token_seconds_sum{model_name="m",is_streaming="true"} 0.3
""",
        """# HELP modelserver_time_to_first_token_seconds [STABLE] Time to first token (TTFT) / first response.
# TYPE modelserver_time_to_first_token_seconds histogram
modelserver_time_to_first_token_seconds_bucket{model="m",backend="sglang",runtime="sglang",le="0.1"} 1
modelserver_time_to_first_token_seconds_bucket{model="m",backend="sglang",runtime="sglang",le="+Inf"} 2
modelserver_time_to_first_token_seconds_count{model="m",backend="sglang",runtime="sglang"} 2
modelserver_time_to_first_token_seconds_sum{model="m",backend="sglang",runtime="sglang"} 0.3
""", id="latency histogram in seconds; is_streaming dropped"),
]


@pytest.mark.parametrize("text,expected", CASES)
def test_sglang_exposition_normalizes_to_exactly(text, expected):
    assert detect_kind(text) == "sglang"
    out = render([Normalizer(SOURCES_BY_KIND["sglang"].table).normalize(text)])
    assert out == expected
