"""Benchmark of the sidecar under model-name churn and under a 200k-series upstream:
``/healthz`` latency and RSS, this tree against another (alternated, same run).

    python benchmarks/bench_churn.py [--base /path/to/other/checkout] [--rounds 2]
        [--seconds 30] [--series-models 67000] [--report 1] [--trace-memory DIR]

Two scenarios, each run by ``tools/soak.py`` (``fleetwatch serve`` as a subprocess on
loopback, an upstream test double, one ``/metrics`` scraper and one ``/healthz`` client):

* **churn**: 300 models, all 300 renamed every scrape, a scrape every 0.5 s — 600 new
  model names a second;
* **series**: ``--series-models`` stable models (3 series each, 67,000 → about 201,000
  series), a scrape every 2 s: the RSS a large upstream costs against the memory limit
  of the generated manifests (``manifests.common.Settings.memory_limit``).

Per scenario and tree it prints ``/healthz`` p50/p99/max (ms) over the run, RSS at the
first and last report and the largest (MB), and the RSS growth over the last third. With
``--base`` the same scenario runs on the other checkout's ``src`` first, then this one's,
``--rounds`` times, and the ratios (this ÷ base) of the p99 and the largest RSS are
printed. Latencies depend on the machine: compare trees within one run, never against a
figure from another machine. ``--report`` sets the seconds between the soak's rows (RSS,
latencies; 30 for a soak of ten minutes).

``--trace-memory DIR`` runs the sidecar under :mod:`memtrace` (this folder; a debug hook
of the benchmark, not of the sidecar): tracemalloc snapshots, RSS, malloc's heap and the
collector's objects by type every ``--trace-every`` seconds into ``DIR/<scenario>-<tree>-<round>``;
``python benchmarks/memtrace.py FOLDER`` prints what grew. Tracing slows the sidecar and
adds to its RSS: a traced run measures where memory goes, not how much.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import soak  # noqa: E402  (tools/soak.py: the harness both scenarios run)

#: The sidecar's program under ``--trace-memory`` (see :mod:`memtrace`).
_TRACED_MAIN = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
                "import memtrace; memtrace.start_from_env(); "
                "from fleetwatch.cli import main; sys.exit(main())")

SCENARIOS = {
    "churn": {"models": 300, "churn": 300, "interval": 0.5},
    "series": {"models": 67_000, "churn": 0, "interval": 2.0},
}


def _run(src: Path, scenario: str, a: argparse.Namespace, trace: Path | None
         ) -> dict[str, Any]:
    """One soak of ``scenario`` with ``src`` on the sidecar's PYTHONPATH (options ``a``),
    traced into ``trace`` (None: not traced)."""
    params = dict(SCENARIOS[scenario])
    if scenario == "series":
        params["models"] = a.series_models
    args = argparse.Namespace(duration=a.seconds, scrapers=1, pause=0.2, forget=3600.0,
                              max_models=2000, report=a.report, json=None, **params)
    os.environ["PYTHONPATH"] = str(src)
    if trace is not None:
        os.environ["FLEETWATCH_MEMTRACE"] = str(trace)
        os.environ["FLEETWATCH_MEMTRACE_EVERY"] = str(a.trace_every)
        soak._MAIN = _TRACED_MAIN
    got = soak.soak(args)
    rows = got["rows"]
    return {"rss_first": rows[0]["rss_mb"], "rss_last": rows[-1]["rss_mb"],
            "rss_max": max(r["rss_mb"] for r in rows),
            "growth_last_third": got["rss_growth_last_third_mb"],
            "healthz_p50": statistics.median(r["healthz_p50_ms"] for r in rows),
            "healthz_p99": max(r["healthz_p99_ms"] for r in rows),
            "answers": got["ok"], "refused": got["refused"],
            "scrapes": got["upstream_scrapes"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", type=Path, help="another checkout to compare with")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--series-models", type=int, default=67_000)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    p.add_argument("--report", type=float, default=1.0, help="seconds between soak rows")
    p.add_argument("--trace-memory", type=Path, metavar="DIR",
                   help="trace the sidecar's memory into DIR (see memtrace.py)")
    p.add_argument("--trace-every", type=float, default=60.0,
                   help="seconds between memory snapshots")
    a = p.parse_args(argv)
    trees = [("this", ROOT / "src")]
    if a.base is not None:
        trees.insert(0, ("base", a.base / "src"))
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for scenario in a.scenario or sorted(SCENARIOS):
        for rnd in range(a.rounds):
            for name, src in trees:
                trace = None if a.trace_memory is None else \
                    a.trace_memory / f"{scenario}-{name}-{rnd}"
                r = _run(src, scenario, a, trace)
                results.setdefault((scenario, name), []).append(r)
                print(f"== {scenario} {name}: healthz p50 {r['healthz_p50']:.1f} ms, p99 "
                      f"{r['healthz_p99']:.1f} ms; RSS {r['rss_first']:.0f} → "
                      f"{r['rss_last']:.0f} MB (max {r['rss_max']:.0f}, last third "
                      f"+{r['growth_last_third']:.1f}); {r['answers']} answers, "
                      f"{r['refused']} refused, {r['scrapes']} upstream scrapes", flush=True)
    print("\nscenario  tree  healthz_p99_ms(median of rounds)  rss_max_mb  growth_last_third_mb")
    for (scenario, name), rs in sorted(results.items()):
        print(f"{scenario:8} {name:5} {statistics.median(r['healthz_p99'] for r in rs):10.1f}"
              f" {statistics.median(r['rss_max'] for r in rs):10.1f}"
              f" {statistics.median(r['growth_last_third'] for r in rs):10.1f}")
    if a.base is not None:
        for scenario in a.scenario or sorted(SCENARIOS):
            b, t = results[(scenario, "base")], results[(scenario, "this")]
            p99 = statistics.median(r["healthz_p99"] for r in t) / max(
                statistics.median(r["healthz_p99"] for r in b), 1e-9)
            rss = statistics.median(r["rss_max"] for r in t) / statistics.median(
                r["rss_max"] for r in b)
            print(f"{scenario}: this ÷ base — healthz p99 ×{p99:.2f}, RSS max ×{rss:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
