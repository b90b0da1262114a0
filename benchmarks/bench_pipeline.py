"""Benchmark of the sidecar's hot path: parse → map → render, per scrape cycle.

    ./dev bench            (or: python benchmarks/bench_pipeline.py [--cycles N])

Generates a 1000-model Triton exposition (core counters + summaries, ~4.5 MB, ~48k
samples) and a 64-engine vLLM 0.33 exposition (from the real fixture, one copy per
``engine``), then prints, per input: MB/s, samples/s and ms per cycle for the first
(cold) cycle and the steady state (label sets cached; the same body again; a busy
server's bodies, where one Triton model in 20 or one vLLM engine in 4 served requests
since the last scrape (:func:`busy_bodies`); and bodies with every tenth value moved at
random, a fifth of the lines differing from the last), prometheus_client's text parser
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


def triton_exposition(models: int = 1000, names: list[str] | None = None) -> str:
    """A Triton 2.51-shaped exposition: per model 48 samples (counters, failures by
    reason, pending gauge, five summaries), families grouped as Triton writes them;
    ``names`` the model names (default ``model_0000``…)."""
    out: list[str] = []
    names = names or [f"model_{i:04d}" for i in range(models)]

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


def changed_values(text: str, cycle: int) -> str:
    """``text`` with every tenth sample's value moved (a busy server: some counters move
    every scrape, most of a 1000-model fleet is idle)."""
    out = []
    for i, line in enumerate(text.split("\n")):
        if line and line[0] != "#" and (i + cycle) % 10 == 0:
            key, _, value = line.rpartition(" ")
            line = f"{key} {float(value) + cycle}"
        out.append(line)
    return "\n".join(out)


def busy_bodies(text: str, kind: str, cycles: int) -> list[str]:
    """Successive bodies of a busy server: per cycle, one Triton model in 20 (one vLLM
    engine in 4), another each cycle, serves requests — every sample of it moves up by
    one (counters, each bucket of a histogram alike, so histograms stay valid; gauges);
    the other models' lines are those of the last body."""
    lines = text.split("\n")
    label, share = ('model="model_', 20) if kind == "triton" else ('engine="', 4)
    owner = []  # per line: its model's or engine's number, or -1
    for line in lines:
        at = line.find(label) if line and line[0] != "#" else -1
        if at < 0:
            owner.append(-1)
            continue
        digits = line[at + len(label):line.index('"', at + len(label))]
        owner.append(int(digits) if digits.isdigit() else -1)
    out = []
    for cycle in range(cycles):
        for i, who in enumerate(owner):
            if who >= 0 and who % share == cycle % share:
                key, _, value = lines[i].rpartition(" ")
                lines[i] = f"{key} {float(value) + 1}"
        out.append("\n".join(lines))
    return out


def sidecar_render(n) -> list[bytes]:
    """What the sidecar renders per cycle (Scraper._render without gzip): the normalized
    families, each as text-format bytes."""
    from fleetwatch.exporters.render import normalized_families

    return [f.text().encode() for f in normalized_families([n])]


def _cpu(f, repeat: int) -> float:
    """Median CPU seconds (time.process_time) of ``f()`` over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        f()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def _case(kind: str, cycles: int, models: int) -> dict:
    """Run in a subprocess: one input, the full cycle, figures as a dict."""
    from prometheus_client.parser import text_string_to_metric_families

    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.sources import TABLES
    from fleetwatch.sidecar.encoding import CACHED_LEVEL, gzip_member

    text = triton_exposition(models) if kind == "triton" else vllm_exposition(models)
    mb = len(text.encode()) / 1e6
    normalizer = Normalizer(TABLES[kind])
    ref_times: list[float] = []

    def reference() -> None:  # interleaved with ours: same machine state
        t0 = time.process_time()
        sum(len(f.samples) for f in text_string_to_metric_families(text))
        ref_times.append(time.process_time() - t0)

    reference()
    t0 = time.process_time()
    n = normalizer.normalize(text)
    out = sidecar_render(n)
    cold = time.process_time() - t0
    samples = n.meta.sample_lines
    out_bytes = sum(map(len, out))
    steady_times = []
    for i in range(cycles):
        t0 = time.process_time()
        sidecar_render(normalizer.normalize(text))
        steady_times.append(time.process_time() - t0)
        if i % max(1, cycles // 3) == 0:
            reference()
    bodies = [changed_values(text, c) for c in range(1, 6)]
    moving = []
    for body in bodies:
        t0 = time.process_time()
        sidecar_render(normalizer.normalize(body))
        moving.append(time.process_time() - t0)
    busy = []
    for body in busy_bodies(text, kind, 6):
        t0 = time.process_time()
        sidecar_render(normalizer.normalize(body))
        busy.append(time.process_time() - t0)
    gz = _cpu(lambda: [gzip_member(b, CACHED_LEVEL) for b in out], 3)
    gz_bytes = sum(len(gzip_member(b, CACHED_LEVEL)) for b in out)
    # a second cold cycle after the first: the reference is measured around both
    cold2 = []
    for _ in range(2):
        fresh = Normalizer(TABLES[kind])
        t0 = time.process_time()
        sidecar_render(fresh.normalize(text))
        cold2.append(time.process_time() - t0)
        reference()
    return {"kind": kind, "models": models, "mb": mb, "samples": samples,
            "out_mb": out_bytes / 1e6, "cold_s": min([cold, *cold2]),
            "steady_s": statistics.median(steady_times),
            "moving_s": statistics.median(moving), "ref_s": statistics.median(ref_times),
            "busy_s": statistics.median(busy),
            "gzip_s": gz, "gzip_mb": gz_bytes / 1e6}


def _rss(kind: str, models: int) -> dict:
    """Run in a subprocess: what the sidecar holds for one target (the body read, the
    normalizer's caches, the last two normalized states, the families' gzip members; the
    plain text is made only for plain scrapers) after a few cycles; peak RSS."""
    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.sources import TABLES
    from fleetwatch.sidecar.encoding import gzip_member

    text = triton_exposition(models) if kind == "triton" else vllm_exposition(models)
    normalizer = Normalizer(TABLES[kind])
    last = None
    for cycle in range(6):
        body = text if cycle % 2 else changed_values(text, cycle)
        n = normalizer.normalize(body)
        encoded = [gzip_member(b) for b in sidecar_render(n)]  # what Scraper.encoded keeps
        last, body = (n, encoded), ""
    assert last is not None
    return {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _run_case(kind: str, cycles: int, models: int) -> dict:
    res = subprocess.run([sys.executable, __file__, "--case", kind, "--cycles", str(cycles),
                          "--models", str(models)], capture_output=True, text=True, check=True)
    out = json.loads(res.stdout)
    res = subprocess.run([sys.executable, __file__, "--case", kind, "--rss", "--models",
                          str(models)], capture_output=True, text=True, check=True)
    out.update(json.loads(res.stdout))  # peak RSS of the sidecar's work alone
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--case", choices=["triton", "vllm"], help=argparse.SUPPRESS)
    ap.add_argument("--models", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--rss", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-scale", action="store_true", help="skip the 10…3000-model runs")
    args = ap.parse_args()
    if args.case:
        models = args.models or (1000 if args.case == "triton" else 64)
        print(json.dumps(_rss(args.case, models) if args.rss else
                         _case(args.case, args.cycles, models)))
        return
    print("Scrape cycle: parse → map (value validation on) → render, CPU time per cycle "
          "(time.process_time),\nmedians; prometheus_client's text parser on the same input "
          "in the same process, interleaved")
    print(f"{'input':<24} {'MB':>5} {'samples':>7} {'phase':<30} {'ms/cycle':>9} "
          f"{'MB/s':>7} {'× ref':>6}")
    for kind, label in (("triton", "Triton, 1000 models"), ("vllm", "vLLM 0.33, 64 engines")):
        r = _run_case(kind, args.cycles, 1000 if kind == "triton" else 64)
        for phase, secs in (("cold (first scrape)", r["cold_s"]),
                            ("steady (same values)", r["steady_s"]),
                            ("busy server", r["busy_s"]),
                            ("1 value in 10 moved", r["moving_s"]),
                            ("prometheus_client parser", r["ref_s"])):
            print(f"{label:<24} {r['mb']:>5.2f} {r['samples']:>7} {phase:<30} "
                  f"{secs * 1e3:>9.1f} {r['mb'] / secs:>7.1f} {r['ref_s'] / secs:>6.2f}")
        print(f"{'':<24} output {r['out_mb']:.2f} MB; gzip once per cycle (level 6) "
              f"{r['gzip_s'] * 1e3:.1f} ms → {r['gzip_mb']:.2f} MB; peak RSS "
              f"{r['peak_rss_mb']:.0f} MB")
    if args.no_scale:
        return
    print("\nTriton by model count (48 samples per model)")
    print(f"{'models':>7} {'MB':>6} {'cold ms':>8} {'× ref':>6} {'steady ms':>10} "
          f"{'MB/s':>6} {'peak RSS MB':>12} {'MB per 1000 models':>19}")
    for models in (10, 100, 1000, 3000):
        r = _run_case("triton", max(5, args.cycles // 2), models)
        print(f"{models:>7} {r['mb']:>6.2f} {r['cold_s'] * 1e3:>8.1f} "
              f"{r['ref_s'] / r['cold_s']:>6.2f} {r['steady_s'] * 1e3:>10.1f} "
              f"{r['mb'] / r['steady_s']:>6.1f} {r['peak_rss_mb']:>12.0f} "
              f"{r['peak_rss_mb'] / models * 1000:>19.0f}")


if __name__ == "__main__":
    main()
