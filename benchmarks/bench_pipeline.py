"""Benchmark of the sidecar's hot path: parse → map → render, per scrape cycle.

    ./dev bench            (or: python benchmarks/bench_pipeline.py [--cycles N])

Generates a 1000-model Triton exposition (core counters + summaries, ~4.5 MB, ~48k
samples) and a 64-engine vLLM 0.33 exposition (from the real fixture, one copy per
``engine``), then prints, per input: MB/s, samples/s and ms per cycle for the first
(cold) cycle and the steady state (label sets cached), prometheus_client's text parser
alone on the same input for comparison, and peak RSS of a fresh process running the
whole cycle. Each case runs in its own subprocess so that peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

QUANTILES = ("0.5", "0.9", "0.95", "0.99", "0.999")
COUNTERS = ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
            "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
            "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
            "nv_inference_compute_output_duration_us")
SUMMARIES = ("nv_inference_request_summary_us", "nv_inference_queue_summary_us",
             "nv_inference_compute_input_summary_us", "nv_inference_compute_infer_summary_us",
             "nv_inference_compute_output_summary_us")


def triton_exposition(models: int = 1000) -> str:
    """A Triton 2.51-shaped exposition: per model 48 samples (counters, failures by
    reason, pending gauge, five summaries), families grouped as Triton writes them."""
    out: list[str] = []
    names = [f"model_{i:04d}" for i in range(models)]

    def lab(m: str, extra: str = "") -> str:
        return f'{{model="{m}",version="1"{extra}}}'

    for fam in COUNTERS:
        out.append(f"# HELP {fam} Cumulative counter\n# TYPE {fam} counter")
        out += [f"{fam}{lab(m)} {1000 + 37 * i}" for i, m in enumerate(names)]
    out.append("# HELP nv_inference_request_failure Number of failed requests\n"
               "# TYPE nv_inference_request_failure counter")
    for i, m in enumerate(names):
        for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
            extra = ',reason="' + reason + '"'
            out.append(f"nv_inference_request_failure{lab(m, extra)} {i % 7}")
    out.append("# HELP nv_inference_pending_request_count Pending\n"
               "# TYPE nv_inference_pending_request_count gauge")
    out += [f"nv_inference_pending_request_count{lab(m)} {i % 3}" for i, m in enumerate(names)]
    for fam in SUMMARIES:
        out.append(f"# HELP {fam} Summary in microseconds\n# TYPE {fam} summary")
        for i, m in enumerate(names):
            out.append(f"{fam}_count{lab(m)} {500 + i}")
            out.append(f"{fam}_sum{lab(m)} {123456 + 11 * i}")
            out += [f"{fam}{lab(m, ',quantile=' + chr(34) + q + chr(34))} {100 + 3 * i + k}"
                    for k, q in enumerate(QUANTILES)]
    return "\n".join(out) + "\n"


def vllm_exposition(engines: int = 64) -> str:
    """The real vLLM 0.33.0 fixture with its per-engine series repeated for ``engines``."""
    src = (ROOT / "tests/fixtures/expositions/vllm/v0.33.0-statlogger-cpu-generated.prom")
    lines = src.read_text().splitlines()
    out: list[str] = []
    for line in lines:
        if 'engine="0"' in line:
            out += [line.replace('engine="0"', f'engine="{e}"') for e in range(engines)]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _case(kind: str, cycles: int) -> dict:
    """Run in a subprocess: one input, the full cycle, figures as a dict."""
    from prometheus_client.parser import text_string_to_metric_families

    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.render import render
    from fleetwatch.exporters.sources import TABLES

    text = triton_exposition() if kind == "triton" else vllm_exposition()
    mb = len(text.encode()) / 1e6
    normalizer = Normalizer(TABLES[kind])
    samples = 0
    times = []  # CPU seconds of this process: a loaded or throttled VM moves wall time more
    for i in range(cycles):
        t0 = time.process_time()
        n = normalizer.normalize(text)
        body = render([n])
        times.append(time.process_time() - t0)
        if i == 0:
            samples = n.meta.sample_lines
            out_bytes = len(body)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cold, steady = times[0], statistics.median(times[1:])
    ref_times = []
    for _ in range(3):
        t0 = time.process_time()
        ref_samples = sum(len(f.samples) for f in text_string_to_metric_families(text))
        ref_times.append(time.process_time() - t0)
    ref = statistics.median(ref_times)
    return {"kind": kind, "mb": mb, "samples": samples, "ref_samples": ref_samples,
            "out_mb": out_bytes / 1e6, "cold_s": cold, "steady_s": steady, "ref_s": ref,
            "peak_rss_mb": rss_mb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--case", choices=["triton", "vllm"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(_case(args.case, args.cycles)))
        return
    print("CPU time per cycle (time.process_time), medians")
    print(f"{'input':<34} {'MB':>6} {'samples':>8} {'phase':<22} {'ms/cycle':>9} "
          f"{'MB/s':>7} {'samples/s':>10} {'peak RSS MB':>12}")
    for kind, label in (("triton", "Triton, 1000 models"), ("vllm", "vLLM 0.33, 64 engines")):
        res = subprocess.run([sys.executable, __file__, "--case", kind, "--cycles",
                              str(args.cycles)], capture_output=True, text=True, check=True)
        r = json.loads(res.stdout)
        for phase, secs in (("fleetwatch cold cycle", r["cold_s"]),
                            ("fleetwatch steady cycle", r["steady_s"]),
                            ("prometheus_client parse", r["ref_s"])):
            print(f"{label:<34} {r['mb']:>6.2f} {r['samples']:>8} {phase:<22} "
                  f"{secs * 1e3:>9.1f} {r['mb'] / secs:>7.1f} {r['samples'] / secs:>10.0f} "
                  f"{r['peak_rss_mb'] if phase.startswith('fleetwatch cold') else '':>12}")
        print(f"{'':<34} speed-up over prometheus_client's parser alone: cold "
              f"{r['ref_s'] / r['cold_s']:.1f}x, steady {r['ref_s'] / r['steady_s']:.1f}x; "
              f"output {r['out_mb']:.2f} MB")


if __name__ == "__main__":
    main()
