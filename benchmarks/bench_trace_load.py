"""Benchmark of the per-request load estimate of trace-based SLIs
(:class:`fleetwatch.traces.concurrency.LoadEstimator`) under a flood of one model's
overlapping requests: CPU seconds to settle ``n`` requests that were all in flight
together (bodies of 500, as the trace receiver hands them over), per request.

    python benchmarks/bench_trace_load.py [--src DIR ...] [--sizes 2000 8000 20000]

``--src`` runs another tree's estimator (e.g. main's, to compare; each tree in its own
subprocess). The estimate reads prefix sums, so the cost per request should stay flat as
``n`` grows; reading every overlapping occupancy would grow linearly with ``n``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import sys, time
from fleetwatch.traces.concurrency import LoadEstimator
from fleetwatch.traces.facts import RequestFacts
n = int(sys.argv[1])
T0 = 1_800_000_000.0
facts = [RequestFacts("vllm", "m", "", f"{i:032x}", T0 + i * 1e-5, T0 + 10 + i * 1e-5, 10.0,
                      occupancy=(T0 + i * 1e-5, T0 + 10 + i * 1e-5)) for i in range(n)]
est = LoadEstimator()
t = time.process_time()
for i in range(0, n, 500):
    est.add(facts[i:i + 500], 0.0)
done = est.add([], 100.0)
cpu = time.process_time() - t
print(f"{n:>7} requests {cpu:8.2f} s CPU {cpu / n * 1e3:8.3f} ms per request")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", default=None, help="a tree's src folder")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 20000])
    args = ap.parse_args()
    for src in args.src or [str(HERE.parent / "src")]:
        print(f"estimator from {src}")
        for n in args.sizes:
            subprocess.run([sys.executable, "-c", _CHILD, str(n)], check=True,
                           env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"})


if __name__ == "__main__":
    main()
