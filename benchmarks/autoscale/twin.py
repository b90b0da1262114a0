"""The advisory twin (``fleetwatch autoscale replay``) against a live run of the
experiment, on the same segment and the same mapping.

    python benchmarks/autoscale/twin.py benchmarks/results/<date>-autoscale-live.json

It writes the live run's requests with their mapped tokens at their trace times (a
mooncake JSONL: the twin's CLI then applies only the run's time compression, with token
scales of 1 and the run's clamps as no-ops), an SLO file like the sidecars' with the
headroom window in production seconds (the twin compresses it itself) selecting the
model of the real-vLLM sweep's captures (the twin's replica model), and runs the
twin with the live fleet's bounds, the static pool's size and the median cold start the
live replicas took (production seconds). It prints, per policy, both attainments and
their difference in points, and both replica-seconds over the segment (the live run's
integrated from the scaler's samples up to the segment's end, where the twin stops
counting) and their ratio — the issue's bounds are ±2 points and ±10 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.autoscale.fleet import FLEETWATCH
from benchmarks.autoscale.run import load_segment, sidecar_slos

from fleetwatch.autoscale.trace import TraceMapping, write_mooncake_jsonl

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "vllm-sweep" / "captures"
#: The model of `CAPTURES` (the real vLLM the live replica is calibrated on).
CAPTURES_MODEL = "tiny-llm"


@dataclass(frozen=True, slots=True)
class Agreement:
    """One policy, live against twin: attainments (0–1) and replica-seconds over the
    segment (replay seconds)."""

    policy: str
    live_attainment: float
    twin_attainment: float
    live_replica_s: float
    twin_replica_s: float

    @property
    def points(self) -> float:
        """Twin minus live attainment, percentage points."""
        return 100.0 * (self.twin_attainment - self.live_attainment)

    @property
    def ratio(self) -> float:
        """Twin ÷ live replica-seconds."""
        return self.twin_replica_s / self.live_replica_s


def segment_replica_seconds(samples: list[dict[str, Any]], end_s: float) -> float:
    """Replica-seconds of the scaler's samples (``t_s``, ``replicas``) from the first
    sample to ``end_s`` (replay seconds), each count held until the next sample."""
    total = 0.0
    for a, b in zip(samples, [*samples[1:], None], strict=True):
        t1 = min(end_s, b["t_s"] if b is not None else end_s)
        if t1 > a["t_s"]:
            total += a["replicas"] * (t1 - a["t_s"])
    return total


def twin_command(live: dict[str, Any], workdir: Path) -> list[str]:
    """The ``fleetwatch autoscale replay`` command for the live run ``live`` (files in
    ``workdir``)."""
    mapping = TraceMapping(**live["mapping"])
    c = mapping.time_compression
    trace = workdir / "segment-mapped.jsonl"
    unscaled = replace(mapping, time_compression=1.0)
    trace.write_text(write_mooncake_jsonl(
        load_segment(live["segment_start_s"], live["segment_s"], unscaled)))
    slos = workdir / "slos.yaml"
    doc = sidecar_slos(unscaled)
    doc["slos"][0]["selector"] = {"models": [CAPTURES_MODEL]}
    slos.write_text(yaml.safe_dump(doc))
    colds = [s for t in live["timelines"].values() for s in t.get("cold_starts_s", [])]
    cold_start = statistics.median(colds) * c if colds else 60.0
    static = next(r["peak_replicas"] for r in live["results"] if r["policy"] == "static")
    peak = max(r["peak_replicas"] for r in live["results"])
    return [FLEETWATCH, "autoscale", "replay", str(trace), "--slos", str(slos),
            "--captures", str(CAPTURES), "--time-compression", f"{c:g}",
            "--token-scale", "1", "--output-token-scale", "1",
            "--max-input-tokens", str(mapping.max_input_tokens),
            "--max-output-tokens", str(mapping.max_output_tokens),
            "--itl-seconds", str(live["slo"]["itl_s"]), "--cold-start", f"{cold_start:.1f}",
            "--max-replicas", str(peak), "--static-replicas", str(static), "--json",
            *[a for r in live["results"] for a in ("--policy", r["policy"])]]


def compare(live: dict[str, Any], twin: dict[str, Any]) -> list[Agreement]:
    """Per policy of the live run, live against twin."""
    end = live["segment_s"] / live["mapping"]["time_compression"]
    by_name = {r["policy"]: r for r in twin["results"]}
    return [Agreement(r["policy"], r["ttft_attainment"], by_name[r["policy"]]["ttft_attainment"],
                      segment_replica_seconds(live["timelines"][r["policy"]]["samples"], end),
                      by_name[r["policy"]]["replica_seconds"])
            for r in live["results"] if r["policy"] in by_name]


def main() -> None:
    """Run the twin for a live result and print the comparison (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("live", type=Path, help="the live run's result JSON")
    args = parser.parse_args()
    live = json.loads(args.live.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        cmd = twin_command(live, Path(tmp))
        print("$ " + " ".join(cmd[:1] + [a if "/" not in a else Path(a).name for a in cmd[1:]]))
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the twin failed ({done.returncode}): {done.stderr.strip()}")
        twin = json.loads(done.stdout)
    print("| policy | live TTFT | twin TTFT | points | live replica-s | twin replica-s "
          "| twin ÷ live |\n|---|---|---|---|---|---|---|")
    for a in compare(live, twin):
        print(f"| {a.policy} | {a.live_attainment:.1%} | {a.twin_attainment:.1%} | "
              f"{a.points:+.1f} | {a.live_replica_s:.0f} | {a.twin_replica_s:.0f} | "
              f"{a.ratio:.2f} |")


if __name__ == "__main__":
    main()
