"""A live concurrency sweep on a real vLLM (CPU), replayed through the SLO engine: figures
and a verdict, never a test failure.

    eval "$(./dev vllm-env)"; python benchmarks/bench_vllm_sweep.py [--sweeps N] [--keep DIR]

`fleetwatch.demo.vllm_sweep.run_sweep` steps a closed-loop streaming client (completions
and chat) through concurrency 1 → 2 → 4 → 8 → 16 against vLLM serving the 24-layer tiny
model (`fleetwatch.demo.vllm.find_vllm_sweep_model`) with ``--max-num-seqs 8``, capturing
``/metrics`` every 2 s. Per sweep it prints whether the sweep can test the knee
(`tests.support.sweep_checks.sweep_problems`: did the client's load reach vLLM's engine,
is the knee sharp at the batch limit) and, when it can, the SLO it gets
(`tests.support.sweep_checks.sweep_slo`), the client's TTFT fraction per step, the
client-side knee, ``fleetwatch slo replay``'s capacity and state at the knee and above it,
and the top step's concurrency component against the client's in-flight ÷ knee.

Whether a live sweep is usable depends on how much of the machine vLLM gets (on a busy
machine the API server starves and vLLM sees fewer requests in flight than the client
sends), which is why this is a benchmark: the tests check the committed sweeps
(``tests/slo/test_vllm_sweeps.py``, ``tests/data/vllm-sweep*``). ``--keep DIR`` keeps the
sweep folders (``tools/capture_vllm_sweep.py`` makes the committed one).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent))  # tests.support.sweep_checks: the sweep's checks

from tests.support.sweep_checks import (  # noqa: E402
    client_knee,
    replay_final,
    step_fractions,
    sweep_problems,
    sweep_slo,
    top_step_signal,
)

from fleetwatch.demo.vllm import VLLMServer, find_vllm_sweep_model  # noqa: E402
from fleetwatch.demo.vllm_sweep import run_sweep  # noqa: E402

STEPS = (1, 2, 4, 8, 16)
#: Seconds each step starts requests (then it drains): with captures every 2 s, at least
#: two captures fall inside the top step's load whatever the phase.
SECONDS_PER_STEP = 6.0
#: The sweep server's KV cache in blocks of 128 tokens, as the tests' session server.
KV_BLOCKS = 24


def report(folder: Path, work: Path) -> list[str]:
    """The figures of one sweep folder, one line each (the problems when it is unusable)."""
    problems = sweep_problems(folder)
    if problems:
        return ["cannot test the knee: " + "; ".join(problems)]
    slo = sweep_slo(folder)
    assert slo is not None  # a sweep without problems has an SLO
    knee = client_knee(folder, slo)
    fractions = step_fractions(folder, slo.threshold_s)
    at_knee = replay_final(folder, work, knee, slo)["slo"]["slos"][0]
    top = float(STEPS[-1])
    above = replay_final(folder, work, top, slo)["slo"]["slos"][0]
    comp, expected = top_step_signal(folder, work, knee, slo)
    return [
        f"usable; SLO {slo}",
        f"TTFT ≤ {slo.threshold_s} s per step: "
        + ", ".join(f"c={c}: {f:.2f}" for c, f in fractions.items()),
        f"client knee {knee:g}; replay capacity {at_knee['capacity']} "
        f"({at_knee['capacity_evidence']}), {at_knee['state']} at envelope {knee:g}, "
        f"{above['state']} at {top:g}",
        f"top-step concurrency component {comp:.2f} vs client in-flight ÷ knee {expected:.2f} "
        f"({comp / expected:.3f}×)",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", type=int, default=1, help="sweeps to run (default 1)")
    ap.add_argument("--keep", type=Path, help="keep the sweep folders here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fw-bench-sweep-") as tmp:
        base = args.keep or Path(tmp)
        with VLLMServer(model=find_vllm_sweep_model(), max_num_seqs=8, prefix_caching=True,
                        num_gpu_blocks_override=KV_BLOCKS) as server:
            print(f"vLLM (24-layer sweep model) started in {server.start_seconds:.1f} s")
            for n in range(1, args.sweeps + 1):
                folder = base / f"sweep-{n}"
                work = Path(tmp) / f"work-{n}"
                work.mkdir(parents=True)
                run_sweep(server.url, server.metrics_url, server.served_model_name, folder,
                          steps=STEPS, seconds_per_step=SECONDS_PER_STEP,
                          scrape_interval_s=2.0, seed=n)
                lines = report(folder, work)
                print(f"sweep {n}: " + "\n  ".join(lines))


if __name__ == "__main__":
    main()
