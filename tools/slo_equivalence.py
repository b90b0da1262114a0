"""Equivalence check of the SLO engine: record its outputs update by update, or compare
them with a recording (made by another checkout's engine, e.g. main's).

    PYTHONPATH=/tmp/main-ref/src python tools/slo_equivalence.py record /tmp/slo-main.json
    PYTHONPATH=$PWD/src         python tools/slo_equivalence.py compare /tmp/slo-main.json

The engine imported (``PYTHONPATH``) is driven through two scenarios, and after every
update its ``/slo`` rows (:meth:`~fleetwatch.slo.engine.SLOEngine.status`),
``/autoscaling`` objects and every ``fleetwatch_slo_*`` sample
(:meth:`~fleetwatch.slo.engine.SLOEngine.iter_metrics`) are serialized (floats exactly,
as ``repr``):

* **fleet**: the benchmark's fleet (``benchmarks/bench_slo.py``: vLLM models, TTFT
  latency, availability and request-mean time-slice SLOs, 8 bands, concurrency walking
  through every band; a third of the models also report waiting requests, so the
  capacity model's queueing form acts; every other model's TTFT grows with concurrency,
  so the model's fit crosses the threshold), ``--models`` models for ``--updates`` updates,
  with a target gap (two snapshots without the target), a counter reset (every counter
  of a fifth of the models restarts), models leaving and new ones arriving (forgotten
  after ``limits.forget_model_after`` = 60 s: rows released and reused);
* **targets**: the same fleet over two targets, now and then a NaN gauge in one (that
  target takes the decoder's series-by-series pass, the other the vectorized one) and
  for a while one model served by both;
* **sweep**: the committed real-vLLM sweep (``tests/data/vllm-sweep``) replayed with the
  envelope at the knee (8) and above it (16), as ``fleetwatch slo replay`` does.

``compare`` prints the first difference of each scenario (update, path, both values) and
exits 1 when there is one; a float difference within ``--ulps`` units in the last place
is reported but accepted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

SWEEP = ROOT / "tests" / "data" / "vllm-sweep"


def _plain(x: Any) -> Any:
    """JSON-ready, floats as their repr (exact, NaN and ±Inf included)."""
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _outputs(engine: Any) -> dict[str, Any]:
    return {"slo": _plain(engine.status()), "autoscaling": _plain(engine.autoscaling()),
            "metrics": _plain(list(engine.iter_metrics()))}


def fleet(models: int, updates: int) -> Iterator[dict[str, Any]]:
    """The benchmark fleet with waiting requests, a gap, a reset and model churn."""
    import bench_slo

    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.snapshot import Snapshot
    from fleetwatch.exporters.sources import TABLES
    from fleetwatch.slo.engine import SLOEngine
    from fleetwatch.slo.spec import parse_slo_file

    spec = dict(bench_slo.SLOS, limits={"forget_model_after": "60s"})
    engine = SLOEngine(parse_slo_file(spec))
    fl = bench_slo.Fleet(models, knee_every=2)
    norm = Normalizer(TABLES["vllm"])
    churn = max(1, models // 10)
    for i in range(updates):
        if i == updates // 2:  # a counter reset: every counter of a fifth of the models
            for m in fl.models[::5]:
                fl.cum[m] = [0.0] * len(fl.cum[m])
        if i == 2 * updates // 3:  # models leave (forgotten after 60 s), new ones arrive
            gone = fl.models[:churn]
            fl.models = fl.models[churn:] + [f"new-{k:03d}" for k in range(churn)]
            for m in gone:
                del fl.cum[m]
            for m in fl.models[-churn:]:
                fl.cum[m] = [0.0] * (len(bench_slo.TTFT) + 6)
        text = fl.exposition()
        lines = [text]
        for k, m in enumerate(fl.models[::3]):
            waiting = (fl.step_no + k) % 4
            lines.append(f'vllm:num_requests_waiting{{model_name="{m}",engine="0"}} '
                         f"{waiting}\n")
        gap = updates // 3 <= i < updates // 3 + 2  # the target is down
        targets = {"vllm": None if gap else norm.normalize("".join(lines))}
        engine.update(Snapshot(1_700_000_000.0 + 5.0 * i, targets))
        yield _outputs(engine)


def targets(models: int, updates: int) -> Iterator[dict[str, Any]]:
    """The benchmark fleet split over two targets: now and then a NaN gauge in one of
    them (that target is decoded series by series), and for a while one model served by
    both (its events summed over the two)."""
    import bench_slo

    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.snapshot import Snapshot
    from fleetwatch.exporters.sources import TABLES
    from fleetwatch.slo.engine import SLOEngine
    from fleetwatch.slo.spec import parse_slo_file

    engine = SLOEngine(parse_slo_file(bench_slo.SLOS))
    fl = bench_slo.Fleet(models, knee_every=2)
    norms = {"a": Normalizer(TABLES["vllm"]), "b": Normalizer(TABLES["vllm"])}
    half = max(1, models // 2)
    shared = f'model_name="{fl.models[0]}",'
    for i in range(updates):
        lines = fl.exposition().splitlines(keepends=True)
        per = len(lines) // models
        parts = {"a": lines[: half * per], "b": lines[half * per:]}
        nan_in = "b" if i % 7 == 3 else "a" if i % 11 == 5 else None
        if nan_in is not None:
            parts[nan_in] = [ln.replace("} 0.", "} NaN #") if "kv_cache" in ln else ln
                             for ln in parts[nan_in]]
            parts[nan_in] = [ln.split(" #")[0] + "\n" if " #" in ln else ln
                             for ln in parts[nan_in]]
        if updates // 3 <= i < updates // 2:  # model 0 also served by target b
            parts["b"] += [ln for ln in lines[:per] if shared in ln]
        snap = {t: norms[t].normalize("".join(ls)) for t, ls in parts.items()}
        engine.update(Snapshot(1_700_000_000.0 + 5.0 * i, snap))
        yield _outputs(engine)


def sweep(envelope: float) -> Iterator[dict[str, Any]]:
    """The committed real-vLLM sweep replayed with the envelope at ``envelope``."""
    from tests.support.sweep_checks import captures, slo_spec, sweep_slo

    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.snapshot import Snapshot
    from fleetwatch.exporters.sources import TABLES
    from fleetwatch.slo.engine import SLOEngine
    from fleetwatch.slo.spec import parse_slo_file

    slo = sweep_slo(SWEEP)
    assert slo is not None
    engine = SLOEngine(parse_slo_file(slo_spec(envelope, slo)))
    norm = Normalizer(TABLES["vllm"])
    for p in captures(SWEEP):
        ts = int(p.stem.rsplit("-", 1)[1]) / 1000.0
        engine.update(Snapshot(ts, {"vllm": norm.normalize(p.read_text(encoding="utf-8"))}))
        yield _outputs(engine)


def scenarios(models: int, updates: int) -> dict[str, list[dict[str, Any]]]:
    return {"fleet": list(fleet(models, updates)), "targets": list(targets(models, updates)),
            "sweep-8": list(sweep(8.0)), "sweep-16": list(sweep(16.0))}


def _ulps(a: float, b: float) -> float:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / math.ulp(max(abs(a), abs(b)))


def _diff(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any, float]]:
    """``(path, a, b, ulps)`` of every difference (ulps: inf unless both are floats)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b) and set(a) == set(b):  # the documents' key order too
            yield f"{path}.<key order>", list(a), list(b), math.inf
        for k in sorted(set(a) | set(b)):
            yield from _diff(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _diff(x, y, f"{path}[{k}]")
    elif a != b:
        try:
            u = _ulps(float(a), float(b))
        except (TypeError, ValueError):
            u = math.inf
        yield path, a, b, u


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["record", "compare"])
    ap.add_argument("file", type=Path)
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--updates", type=int, default=150)
    ap.add_argument("--ulps", type=float, default=4.0)
    args = ap.parse_args()
    import fleetwatch

    print(f"engine: {Path(fleetwatch.__file__).parent}")
    got = scenarios(args.models, args.updates)
    if args.mode == "record":
        args.file.write_text(json.dumps(got), encoding="utf-8")
        print(f"recorded {', '.join(f'{k}: {len(v)} updates' for k, v in got.items())}")
        return 0
    want = json.loads(args.file.read_text(encoding="utf-8"))
    failed = False
    for name, ref in want.items():
        mine = got[name]
        small = 0
        first: tuple[int, str, Any, Any, float] | None = None
        for i, (r, m) in enumerate(zip(ref, mine, strict=True)):
            for path, a, b, u in _diff(r, m, ""):
                if u <= args.ulps:
                    small += 1
                elif first is None:
                    first = (i, path, a, b, u)
        if first is None:
            print(f"{name}: {len(ref)} updates identical"
                  + (f" ({small} floats within {args.ulps:g} ulps)" if small else ""))
        else:
            failed = True
            i, path, a, b, u = first
            print(f"{name}: DIFFERS at update {i}, {path}: {a!r} (recorded) vs {b!r}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
