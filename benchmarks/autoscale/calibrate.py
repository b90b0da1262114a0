"""Calibration of the LLM-shaped replica against the committed real-vLLM sweep.

``tests/data/vllm-sweep/requests.jsonl`` is the client's record of every request of a
closed-loop sweep (1, 2, 4, 8, 16 concurrent requests) against a real vLLM; its mean time
to first token per level is the curve the replica must reproduce within `TOLERANCE`.
`compare` replays each level's own request sizes through `llm_engine.simulate_closed_loop`;
``python benchmarks/autoscale/calibrate.py --fit`` searches the step-time coefficients
(the result is `llm_engine.CALIBRATED`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.autoscale.llm_engine import (
    CALIBRATED,
    EngineConfig,
    Shape,
    simulate_closed_loop,
)

SWEEP = Path(__file__).resolve().parents[2] / "tests" / "data" / "vllm-sweep" / "requests.jsonl"
#: Largest relative error of the replica's mean TTFT at any level of the sweep.
TOLERANCE = 0.15


@dataclass(frozen=True, slots=True)
class SweepLevel:
    """One level of the real sweep: its requests' sizes and mean client TTFT (s)."""

    concurrency: int
    shapes: tuple[Shape, ...]
    mean_ttft_s: float
    mean_itl_s: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """The replica's mean TTFT at one level against the sweep's."""

    concurrency: int
    sweep_ttft_s: float
    model_ttft_s: float
    sweep_itl_s: float
    model_itl_s: float

    @property
    def error(self) -> float:
        """Relative error of the model's mean TTFT."""
        return abs(self.model_ttft_s - self.sweep_ttft_s) / self.sweep_ttft_s


def sweep_levels(path: Path = SWEEP) -> list[SweepLevel]:
    """The sweep's levels, in order of concurrency (successful streamed requests only)."""
    rows: dict[int, list[dict[str, object]]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("error") is None and row.get("ttft_s") is not None:
            rows.setdefault(int(row["step"]), []).append(row)
    levels = []
    for concurrency in sorted(rows):
        records = rows[concurrency]
        shapes = tuple(Shape(int(r["prompt_tokens"]), max(1, int(r["completion_tokens"])))
                       for r in records)
        ttft = sum(float(r["ttft_s"]) for r in records) / len(records)
        gaps = [(float(r["e2e_s"]) - float(r["ttft_s"])) / (int(r["completion_tokens"]) - 1)
                for r in records if int(r["completion_tokens"]) > 1]
        levels.append(SweepLevel(concurrency, shapes, ttft, sum(gaps) / len(gaps)))
    return levels


def compare(config: EngineConfig, levels: list[SweepLevel]) -> list[Comparison]:
    """The replica against every level, each run on as many requests as the sweep had."""
    out = []
    for level in levels:
        result = simulate_closed_loop(config, level.shapes, level.concurrency,
                                      max(len(level.shapes), 4 * level.concurrency))
        out.append(Comparison(level.concurrency, level.mean_ttft_s, result.mean_ttft_s,
                              level.mean_itl_s, result.mean_itl_s))
    return out


def _fit(levels: list[SweepLevel]) -> tuple[float, EngineConfig]:
    best: tuple[float, EngineConfig] = (float("inf"), CALIBRATED)
    grid = itertools.product(
        [0.0045, 0.005, 0.0055, 0.006],               # step_base_s
        [0.0003, 0.0004, 0.0005, 0.0006],             # step_per_seq_s
        [0.00002, 0.00005],                           # prefill_per_token_s
        [0.004, 0.005, 0.006, 0.007],                 # frontend_s
        [0.0015, 0.002, 0.0025, 0.003],               # first_token_per_seq_s
        [28, 32, 36],                                 # kv_blocks
    )
    for base, per_seq, prefill, frontend, first, blocks in grid:
        config = replace(CALIBRATED, kv_blocks=blocks, step_base_s=base, step_per_seq_s=per_seq,
                         prefill_per_token_s=prefill, frontend_s=frontend,
                         first_token_per_seq_s=first)
        worst = max(c.error for c in compare(config, levels))
        if worst < best[0]:
            best = (worst, config)
    return best


def main() -> None:
    """Print the comparison of `CALIBRATED` (or, with ``--fit``, of the best grid point)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="search the step-time coefficients")
    args = parser.parse_args()
    levels = sweep_levels()
    config = _fit(levels)[1] if args.fit else CALIBRATED
    print(config)
    for c in compare(config, levels):
        print(f"c={c.concurrency:2d} ttft sweep {c.sweep_ttft_s * 1e3:7.1f} ms model "
              f"{c.model_ttft_s * 1e3:7.1f} ms ({c.error:5.1%})  itl sweep "
              f"{c.sweep_itl_s * 1e3:5.1f} ms model {c.model_itl_s * 1e3:5.1f} ms")


if __name__ == "__main__":
    main()
