"""Benchmark of one evaluation of the sidecar's configuration watch at its bound: the
drift comparison, the lint and the exposition of :attr:`ConfigWatch.MAX_MODELS` Triton
models (every model declared, half latency-tier, a third on a vLLM backend with dynamic
batching, on eight GPUs), the work :meth:`ConfigWatch.evaluate` does once per
``scrape.config_interval_seconds``, off the ``/metrics`` path.

    python benchmarks/bench_config_watch.py [--models 1000] [--repeat 5]

Prints the rows, findings, exposition size and the CPU time of this process (min and
median of ``--repeat`` runs). The HTTP reads are not included: they are bounded by the
scrape timeout, not by CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fleetwatch.governance import drift, lint
from fleetwatch.governance.running import index_by_model, triton_running
from fleetwatch.labels.registry import parse_registry
from fleetwatch.sidecar.config_watch import ConfigWatch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=ConfigWatch.MAX_MODELS)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.models
    reg = parse_registry({"models": [
        {"name": f"m{i}", "team": "t", "owner": "o", "oncall": "c",
         "latency_tier": "interactive" if i % 2 else "batch",
         "declared": {"model_version": "2", "dynamic_batching": True,
                      "engine_version": "2.51.0",
                      "instance_groups": [{"kind": "KIND_GPU", "count": 1, "gpus": [i % 8]}]}}
        for i in range(n)]})
    configs = {f"m{i}": {"backend": "vllm" if i % 3 == 0 else "python",
                         "dynamic_batching": {},
                         "instance_group": [{"kind": "KIND_GPU", "count": 1, "gpus": [i % 8]}]}
               for i in range(n)}
    index = [{"name": f"m{i}", "version": v, "state": "READY"}
             for i in range(n) for v in ("1", "2")]
    times = []
    rows: list[drift.FieldDrift] = []
    findings: list[lint.Finding] = []
    text = ""
    for _ in range(args.repeat):
        t0 = time.process_time()
        grouped = index_by_model(index) or {}
        rows = []
        for m, c in configs.items():
            run = triton_running(c, grouped.get(m, []), m, {"engine_version": "2.51.0"})
            entry = reg.lookup(m)
            assert entry is not None and entry.declared is not None
            rows += drift.compare(m, entry.declared, run)
        findings = lint.lint([lint.ModelFacts(m, c, reg.lookup(m), False)
                              for m, c in configs.items()])
        text = drift.exposition(rows, {}) + lint.exposition(findings)
        times.append(time.process_time() - t0)
    print(f"{n} models: {len(rows)} drift rows, {len(findings)} findings, exposition "
          f"{len(text)} bytes; CPU s min {min(times):.3f} median "
          f"{statistics.median(times):.3f} ({args.repeat} runs)")


if __name__ == "__main__":
    main()
