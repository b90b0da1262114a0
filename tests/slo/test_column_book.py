"""The engine's accounting (slo/account/columns.py, book.py) books what the per-item
oracle (tests/slo/oracle.py) books.

Two engines read the same snapshots: the engine, and the oracle's engine that accounts
interval by interval and SLO by SLO. After every update their ``/slo``, ``/autoscaling``
and ``fleetwatch_slo_*`` outputs must be equal — floats exactly — through what changes
the engine's compiled layout: states and rows made (bands reached for the first time),
states refused by ``limits.max_models_per_slo``, a latency threshold that is no bucket
boundary (``misconfigured``, set and cleared with the bucket layout), a counter reset,
a target gap, models forgotten and new ones arriving (rows released and reused), a NaN
gauge (the value refused) and a model served by two targets (its events summed): the
last two decode into one plan merged over the targets.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_slo

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.slo.account.concurrency import estimate_columns
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.slo.oracle import ItemEngine, estimate_of

MODELS = 24
UPDATES = 90


def _spec(max_models: int) -> dict:
    spec = copy.deepcopy(bench_slo.SLOS)
    # 0.3 s is no TTFT bucket boundary of the fleet: misconfigured until the layout
    # gains it
    spec["slos"].append({"name": "ttft-300ms", "sli": {"latency": {
        "metric": "ttft", "threshold_seconds": 0.3}}, "objectives": [{"target": 0.95}],
        "timeWindow": [{"duration": "28d"}],
        "concurrency": {"envelope": 16, "bands": [2, 8, 32]}})
    spec["limits"] = {"forget_model_after": "60s", "max_models_per_slo": max_models}
    return spec


def _outputs(engine: SLOEngine) -> str:
    return json.dumps({"slo": engine.status(), "autoscaling": engine.autoscaling(),
                       "metrics": list(engine.iter_metrics())}, default=repr)


def _snapshots():
    fl = bench_slo.Fleet(MODELS, knee_every=2)
    norm, other_norm = Normalizer(TABLES["vllm"]), Normalizer(TABLES["vllm"])
    ttft = bench_slo.TTFT
    for i in range(UPDATES):
        if i == UPDATES // 2:  # a counter reset of every fifth model
            for m in fl.models[::5]:
                fl.cum[m] = [0.0] * len(fl.cum[m])
        if i == 2 * UPDATES // 3:  # models leave (forgotten after 60 s), new ones come
            gone = fl.models[:4]
            fl.models = fl.models[4:] + [f"new-{k}" for k in range(4)]
            for m in gone:
                del fl.cum[m]
            for m in fl.models[-4:]:
                fl.cum[m] = [0.0] * (len(ttft) + 6)
        text = fl.exposition()
        if i >= UPDATES // 4:  # the layout gains a 0.3 s bucket: the threshold matches
            old, new = 'le="0.25"', 'le="0.3"'
            text = "".join(line + "\n" + (line.replace(old, new) + "\n" if old in line else "")
                           for line in text.splitlines())
        for k, m in enumerate(fl.models[::3]):
            text += (f'vllm:num_requests_waiting{{model_name="{m}",engine="0"}} '
                     f"{(fl.step_no + k) % 4}\n")
        gap = UPDATES // 3 <= i < UPDATES // 3 + 2
        lines = text.splitlines(keepends=True)
        if i % 7 == 3 and not gap:  # a NaN KV-cache gauge: the value is refused
            lines = [ln.rsplit(" ", 1)[0] + " NaN\n" if "kv_cache" in ln else ln
                     for ln in lines]
        shared = f'model_name="{fl.models[0]}"'
        other = [ln for ln in lines if shared in ln] if _shared(i) else []
        yield Snapshot(1_700_000_000.0 + 5.0 * i,
                       {"vllm": None if gap else norm.normalize("".join(lines)),
                        "other": other_norm.normalize("".join(other)) if other else None})


def _shared(i: int) -> bool:
    """Whether update ``i`` has the first model served by a second target too."""
    return UPDATES // 5 <= i < UPDATES // 5 + 10


def _merged(i: int) -> bool:
    """Whether update ``i`` decodes into one plan merged over its targets."""
    gap = UPDATES // 3 <= i < UPDATES // 3 + 2
    return not gap and (i % 7 == 3 or _shared(i))


@pytest.mark.parametrize("max_models", [MODELS, MODELS - 5])
def test_the_engine_books_what_the_per_item_oracle_books(max_models):
    spec = parse_slo_file(_spec(max_models))
    columns, items = SLOEngine(spec), ItemEngine(spec)
    states = []
    merged = 0
    for i, snap in enumerate(_snapshots()):
        columns.update(snap)
        items.update(snap)
        merged += any(not v.plan.keys for v in columns._layout._views.values())  # Plan.merged
        states.append({st.state for st in columns.states.values()
                       if st.slo.name == "ttft-300ms"})
        assert _outputs(columns) == _outputs(items), f"update {i}"
    assert merged == len([i for i in range(UPDATES) if _merged(i)])
    # the threshold error was set, then cleared when the layout gained the bucket
    assert states[UPDATES // 4 - 1] == {"misconfigured"}
    assert "misconfigured" not in states[-1] and states[-1]
    if max_models < MODELS:
        assert columns.models_refused["ttft"] > 0


_value = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.0, 8.0, -1.0, math.nan]),
                   st.floats(min_value=-5, max_value=50, allow_nan=False))


@given(st.lists(st.tuples(_value, _value, st.one_of(st.none(), st.tuples(
    st.sampled_from([0.0, 1.0, 3.0, -1.0, math.nan]), _value.filter(lambda v: v is not None))),
    _value, st.sampled_from([0.0, -1.0, 0.5, 2.0, 5.0, 60.0]), _value), min_size=1, max_size=40))
def test_estimate_columns_is_estimate_of_for_every_model(rows):
    """The column path's concurrency (concurrency.estimate_columns) is the per-model
    estimate_of, float for float and estimator for estimator, through absent, zero,
    negative zero, negative and NaN inputs."""
    def column(xs):
        return (np.asarray([math.nan if x is None else x for x in xs], dtype=float),
                np.asarray([x is not None for x in xs], dtype=bool))

    running, waiting, duration, prev_in, dt, previous = zip(*rows, strict=True)
    count = column([None if d is None else d[0] for d in duration])
    total = column([None if d is None else d[1] for d in duration])
    conc, names = estimate_columns(column(running), column(waiting), (count, total),
                                   column(prev_in), np.asarray(dt, dtype=float),
                                   column(previous))
    for k, (r, w, d, p, t, q) in enumerate(rows):
        want = estimate_of(r, w, d, p, t, q)
        if want is None:
            assert names[k] is None and math.isnan(conc[k]), (rows[k], conc[k], names[k])
        else:
            assert names[k] == want[1], (rows[k], want, names[k])
            assert repr(float(conc[k])) == repr(want[0]), (rows[k], want, conc[k])


def test_a_summary_quantile_time_slice_books_what_the_oracle_books():
    """A time slice on Triton's p99 summary: one event per interval with observations,
    good when the quantile is ≤ the threshold; an interval whose quantile is NaN (no
    observation in Triton's window) or absent books nothing."""
    spec = parse_slo_file({"slos": [
        {"name": "p99", "sli": {"timeslice": {"metric": "request", "statistic": "p99",
                                              "threshold_seconds": 0.05}},
         "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1h"}],
         "budgetingMethod": "Timeslices", "concurrency": {"envelope": 4}}]})
    columns, items = SLOEngine(spec), ItemEngine(spec)
    norm = Normalizer(TABLES["triton"])
    p99s = [0.01, 0.02, 0.08, 0.03, math.nan, 0.2, 0.04, None, 0.01, 0.06]
    n = 0
    for i, p99 in enumerate(p99s):
        n += 10 * (i % 3)
        body = (f'nv_inference_request_success{{model="m",version="1"}} {n}\n'
                f'nv_inference_request_duration_us{{model="m",version="1"}} {n * 20_000}\n'
                f'nv_inference_request_summary_us_count{{model="m",version="1"}} {n}\n'
                f'nv_inference_request_summary_us_sum{{model="m",version="1"}} {n * 20_000}\n')
        if p99 is not None:
            body += (f'nv_inference_request_summary_us{{model="m",version="1",'
                     f'quantile="0.99"}} {p99 * 1e6}\n')
        snap = Snapshot(1_700_000_000.0 + 5.0 * i, {"t": norm.normalize(body)})
        columns.update(snap)
        items.update(snap)
        assert _outputs(columns) == _outputs(items), f"update {i}"
    st = columns.states[("p99", ("m", "1", "triton"))]
    # intervals with observations (i % 3 ≠ 0) and a finite p99: 1, 2, 5, 8
    booked = [p for i, p in enumerate(p99s) if i and i % 3 and p is not None and p == p]
    assert st.events["all"] == len(booked) == 4
    assert st.good["all"] == sum(p <= 0.05 for p in booked) == 2
