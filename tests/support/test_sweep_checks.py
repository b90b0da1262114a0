"""`tests.support.sweep_checks.sweep_problems` on copies of the committed real-vLLM sweep, each
changed the way a starved, stalled or slower machine changes a sweep: the sweep tests and the
live-sweep benchmark trust it to say when a sweep cannot test the knee, so it must say so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import sweep_checks
from tests.support.sweep_checks import STEP_MIN, SweepSLO, step_fractions, sweep_problems, sweep_slo

SWEEP = Path(__file__).resolve().parents[1] / "data" / "vllm-sweep"


@pytest.fixture
def copy(tmp_path) -> Path:
    folder = tmp_path / "sweep"
    shutil.copytree(SWEEP, folder)
    return folder


def _rewrite(path: Path, change) -> None:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps(change(r)) + "\n" for r in lines), encoding="utf-8")


def test_the_committed_sweep_can_test_the_knee():
    assert sweep_problems(SWEEP) == []


def test_requests_vllm_never_saw_make_the_sweep_unusable(copy):
    # the client's requests last 1.5× what vLLM saw: they waited in the API server
    def slower(r: dict) -> dict:
        return {**r, "e2e_s": r["e2e_s"] * 1.5}
    _rewrite(copy / "requests.jsonl", slower)
    problems = sweep_problems(copy)
    assert len(problems) == 1 and problems[0].startswith("vLLM saw "), problems
    assert "the machine starved the server" in problems[0]


def _steps(copy: Path, change) -> None:
    path = copy / "steps.json"
    path.write_text(json.dumps(change(json.loads(path.read_text(encoding="utf-8")))),
                    encoding="utf-8")


def test_the_committed_sweeps_slo_is_the_tightest_its_batch_limit_steps_meet():
    # 40 ms: every step up to 8 had ≥ 93 % (the worst, c=8, 98.9 %); 20 ms: c=8 62 %
    assert sweep_slo(SWEEP) == SweepSLO(0.04, 0.94)  # 98.9 % − 4 points, floored
    assert min(step_fractions(SWEEP, 0.02)[c] for c in (1, 2, 4, 8)) < STEP_MIN
    assert min(step_fractions(SWEEP, 0.04)[c] for c in (1, 2, 4, 8)) >= STEP_MIN


def test_a_slower_machine_gets_a_looser_slo_and_still_the_knee_at_the_batch_limit(
        copy, monkeypatch):
    # a machine on which 40 ms is out of reach: the next boundary that the steps meet
    monkeypatch.setattr(sweep_checks, "THRESHOLDS", (0.02, 0.06, 0.1))
    assert sweep_slo(copy) == SweepSLO(0.06, 0.96)  # every step up to 8: 100 %
    assert sweep_problems(copy) == []


def test_a_sweep_whose_top_step_met_the_objective_has_no_knee_at_the_batch_limit(copy):
    # the top step's captures relabelled as another step at 8: the objective met at the top
    _steps(copy, lambda steps: [*steps[:-1], {**steps[-2], "concurrency": 16}])
    assert any("the knee is at concurrency 16, not at the batch limit 8" in p
               for p in sweep_problems(copy)), sweep_problems(copy)


def test_a_step_below_the_batch_limit_that_no_threshold_fits_is_named(copy, monkeypatch):
    # step 2 measured over the top step's captures: 0.3 % within 20 ms, 1.5 % within 40
    monkeypatch.setattr(sweep_checks, "THRESHOLDS", (0.02, 0.04))
    _steps(copy, lambda steps: [steps[0], {**steps[-1], "concurrency": 2}, *steps[2:]])
    problems = sweep_problems(copy)
    assert problems == ["no threshold within which every step up to the batch limit 8 had "
                        "94% of its first tokens (worst step 20 ms: 0.003, 40 ms: 0.015)"]


def test_a_soft_break_above_the_batch_limit_is_named(copy):
    # the top step measured from the start of step 4: 57 % within 40 ms, a soft knee
    _steps(copy, lambda steps: [*steps[:-1], {
        **steps[-1], "start_capture": steps[2]["start_capture"],
        "requests": sum(s["requests"] for s in steps[2:])}])
    problems = sweep_problems(copy)
    assert len(problems) == 1 and "a soft knee" in problems[0], problems
    assert problems[0].startswith("TTFT ≤ 40 ms at 94%: the step above the knee 8 met the "
                                  "threshold for 0.56"), problems


def test_the_top_step_is_read_over_its_load_not_its_drain():
    # the slow sweep's last capture before the end of its top step came 0.74 s after the
    # client's last request start: the queue was draining, and vLLM's e2e Little's law
    # there counts waits that began before the interval; it is left out
    slow = SWEEP.parent / "vllm-sweep-slow"
    top = sweep_checks.steps(slow)[-1]
    last_start = max(json.loads(x)["t_start"] for x in (slow / "requests.jsonl").read_text(
        encoding="utf-8").splitlines() if json.loads(x)["step"] == "16")
    caps = sweep_checks.captures(slow)
    names = [p.name for p in caps]
    periodic = caps[names.index(top["start_capture"]) + 1:names.index(top["end_capture"])]
    inside = sweep_checks.load_captures(slow)
    assert inside == [p for p in periodic if sweep_checks.stamp(p) <= last_start]
    assert len(inside) == 2 and periodic[-1] not in inside
