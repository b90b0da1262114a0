"""An LLM load scenario on a real vLLM: TTFT and SLO events as concurrency steps up.

`fleetwatch.demo.vllm_sweep.run_sweep` steps a closed-loop streaming client (completions and
chat) through concurrency 1 → 2 → 4 → 8 → 16 against vLLM with ``--max-num-seqs 8``,
capturing ``/metrics`` every 2 s and after each step drained. Three sweeps are checked the
same way: a live one (``vllm`` marker), the one kept under ``tests/data/vllm-sweep/`` (made by
``tools/capture_vllm_sweep.py``; no vLLM needed) and a live one of a CI run on a slower
machine, kept under ``tests/data/vllm-sweep-slow/`` (its README). All run on the 24-layer
tiny model
(`fleetwatch.demo.vllm.find_vllm_sweep_model`, its own vLLM server in this module): its
engine step (≈ 8 ms) outweighs the API server's per-token work, so the requests beyond the
batch limit wait in vLLM's engine, where its metrics count them. On the 2-layer session
model (≈ 2 ms per step) the API server, on 2 shared cores, was the bottleneck: vLLM's
Little's law read 1–4 of the client's 4–16 in flight from run to run, and the knee and
signal checks below failed on most live sweeps.

Per step:

* vLLM's TTFT histogram ``_count`` (normalized) grows by exactly the client's requests;
* the server's fraction of requests with TTFT ≤ b, at every bucket boundary b, brackets
  the client's: ``client(b) ≤ server(b) ≤ client(b + δ)``. vLLM's clock starts when the
  API server hands the request to the engine (after HTTP parsing, validation and
  tokenization) and stops when the first token is produced (before it is streamed), so the
  server reads faster. δ is measured per step (the smallest multiple of 5 ms that
  brackets) and must stay within `DELTA_MAX_S`; measured 5–140 ms on the 24-layer model
  (set by the slowest client requests);
* the SLO engine fed the captures counts as many TTFT events as the step had requests;
* its burn rate (the sweep's SLO, `tests.sweep_checks.sweep_slo`: e.g. TTFT ≤ 40 ms at
  94 % for the committed sweep) is below 1 at concurrency 1 and above `TOP_BURN_MIN` = 1
  at 16, where requests wait for one of the 8 slots (measured 16.4 on the committed one).

And ``fleetwatch slo replay`` of each sweep (the checks of ``tests/test_slo_replay.py``,
shared in ``tests/sweep_checks.py``): capacity at the knee measured from the client side
(the highest step whose requests met the objective) within 10 %, ``overload`` with the
envelope at the knee, ``regression`` with it at the top step, and the concurrency
component of the signal at the top step within 10 % of the client's in-flight
concurrency ÷ knee.

Those checks compare what vLLM's metrics say with what the client measured, so they need
a sweep in which the client's load reached vLLM and the knee is sharp at the batch limit
(`tests.sweep_checks.sweep_problems`, measured from the sweep, not from the engine under
test); the live fixture runs another sweep when one is not (at most `SWEEP_ATTEMPTS`, each
verdict printed, none usable fails). The SLO follows the machine
(`tests.sweep_checks.sweep_slo`: the tightest TTFT threshold and objective that the steps
up to the batch limit meet with a margin): the fresh-clone CI run of 0344b70 had a
fixed 40 ms / 90 %, on a machine where only 91–93 % of the first tokens at concurrency 2
came within 40 ms, and all 3 live sweeps were rejected (knee 1 or 2).

Measured 2026-12-02 on the shared 2-core machine, 22 sweeps: the committed one, the 11
live ones of 2026-12-01, and 10 new live ones, 7 of them with vLLM's compute bound to one
core (``VLLM_CPU_OMP_THREADS_BIND=0``: a slower machine, 56–95 % of the first tokens within
40 ms at the batch limit), each replayed with the SLO it gets. All 15 usable ones pass
every check: SLO 40 ms at 90–96 % (8), 60 ms at 96 % (6), 80 ms at 96 % (1); capacity
8.0–8.09; component 0.94–1.05 of the client's in-flight ÷ knee. The 7 unusable ones are
those in which vLLM saw 51–90 % of the client's in-flight requests at the top step (or
the machine stalled), 5 of which fail a check. One slow sweep had first read capacity
7.34 and a component 13 % high: both captures of its top step read 7 running, 8
waiting, and the engine took 7 for the batch limit; it now takes the most requests seen
running once requests wait (`fleetwatch.slo.account.ledger.ModelGauges`): 8.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import VLLM_KV_BLOCKS
from tests.helpers import ROOT, SLOReplay, buckets, normalized_samples, pick, require_vllm
from tests.sweep_checks import (
    client_knee,
    replay_final,
    slo_spec,
    step_fractions,
    sweep_problems,
    sweep_slo,
    top_step_signal,
)

from fleetwatch.demo.vllm import VLLMServer, find_vllm_sweep_model
from fleetwatch.demo.vllm_sweep import load_sweep, run_sweep

COMMITTED = ROOT / "tests" / "data" / "vllm-sweep"
#: A live sweep of a fresh-clone CI run on a slower (shared) machine, kept (its README)
COMMITTED_SLOW = ROOT / "tests" / "data" / "vllm-sweep-slow"
STEPS = (1, 2, 4, 8, 16)
TTFT = "modelserver_time_to_first_token_seconds"
TOP_BURN_MIN = 1.0
#: Live sweeps run at most to get one that can test the knee (`sweep_problems`).
SWEEP_ATTEMPTS = 4
#: How long each live step starts requests (seconds; then it drains), as the committed
#: sweep: with captures every 2 s, ≥ 2 of them fall inside the top step's load whatever
#: the phase (`tests.sweep_checks.load_captures`). With 4 s a fresh-clone run's last
#: capture of the top step fell 0.9 s into the drain and the check read the drain.
SECONDS_PER_STEP = 6.0
#: Upper bound of the client-minus-server TTFT offset δ (seconds). Measured 45–800 ms on
#: the 2-core CI machine, growing with concurrency (see the module docstring); the bound
#: leaves room for a busier machine and still catches a client clock that is off by seconds.
DELTA_MAX_S = 2.0


class Sweep:
    """A sweep folder read back: steps, client records, and per capture the normalized
    samples and the SLO engine's cumulative TTFT (good, total) events."""

    def __init__(self, folder: Path, attempts: tuple[str, ...] = ()) -> None:
        self.folder = folder
        self.attempts = attempts  # live: one line per sweep run, the usable one last
        self.steps, self.requests, captures = load_sweep(folder)
        slo = sweep_slo(folder)
        assert slo is not None, sweep_problems(folder)  # the fixtures yield usable sweeps
        self.slo = slo
        # the per-step checks: a band burns at a lower burn rate, trusted from 10 events
        replay = SLOReplay(slo_spec(8, slo, budget_consumed=0.05, min_events=10))
        self.norm: dict[str, list] = {}
        self.events: dict[str, tuple[float, float]] = {}
        for path in captures:
            text = path.read_text(encoding="utf-8")
            self.norm[path.name] = normalized_samples(text)
            replay.feed(int(path.stem.split("-")[1]) / 1000, text)
            rows = [r for r in replay.status() if r["model"] == "tiny-llm"]
            state = replay.engine.states.get(("ttft", ("tiny-llm", "", "vllm")))
            good = state.good.get("all", 0.0) if state is not None else 0.0
            self.events[path.name] = (good, sum(r["events"].get("all", 0.0) for r in rows))
        self.burn_rate = replay.burn_rate

    def step_requests(self, step: dict) -> list[dict]:
        return [r for r in self.requests if r["step"] == str(step["concurrency"])]

    def ttft_delta(self, step: dict) -> dict[float, float]:
        """The step's TTFT bucket deltas ``{le: count}`` (normalized)."""
        end = buckets(self.norm[step["end_capture"]], TTFT)
        start = buckets(self.norm[step["start_capture"]], TTFT)
        return {le: end[le] - start.get(le, 0.0) for le in end}

    def step_events(self, step: dict) -> tuple[float, float]:
        g1, t1 = self.events[step["end_capture"]]
        g0, t0 = self.events[step["start_capture"]]
        return g1 - g0, t1 - t0


@pytest.fixture(scope="module")
def sweep_server() -> Iterator[VLLMServer]:
    """A real vLLM serving the 24-layer tiny model (`find_vllm_sweep_model`) as the session
    server serves the 2-layer one: ``--max-num-seqs 8``, prefix caching on,
    ``VLLM_KV_BLOCKS`` blocks. Its own process (the session server, idle meanwhile, costs
    < 1 % of a core)."""
    require_vllm()
    with VLLMServer(model=find_vllm_sweep_model(), max_num_seqs=8, prefix_caching=True,
                    num_gpu_blocks_override=VLLM_KV_BLOCKS) as server:
        print(f"\nvLLM (sweep model) started in {server.start_seconds:.1f} s")
        yield server


@pytest.fixture(scope="module")
def live_sweep(sweep_server, tmp_path_factory) -> Iterator[Sweep]:
    """A live sweep that can test the knee (`tests.sweep_checks.sweep_problems` empty:
    the client's load reached vLLM and the knee is sharp). A sweep that cannot is
    measured again, at most `SWEEP_ATTEMPTS` sweeps (≈ 32 s each); every attempt's
    verdict is printed, and none usable fails the module's live tests with them."""
    attempts: list[str] = []
    for attempt in range(1, SWEEP_ATTEMPTS + 1):
        folder = tmp_path_factory.mktemp("vllm-sweep")
        run_sweep(sweep_server.url, sweep_server.metrics_url, sweep_server.served_model_name,
                  folder, steps=STEPS, seconds_per_step=SECONDS_PER_STEP,
                  scrape_interval_s=2.0,
                  seed=attempt)
        problems = sweep_problems(folder)
        attempts.append(f"live sweep {attempt}: " + ("; ".join(problems) or "usable"))
        if not problems:
            yield Sweep(folder, tuple(attempts))
            return
    pytest.fail(f"no live sweep in {SWEEP_ATTEMPTS} could test the knee:\n"
                + "\n".join(attempts))


@pytest.fixture(scope="module")
def committed_sweep() -> Sweep:
    return Sweep(COMMITTED)


@pytest.fixture(scope="module")
def committed_slow_sweep() -> Sweep:
    return Sweep(COMMITTED_SLOW)


@pytest.fixture(params=[pytest.param("live", marks=pytest.mark.vllm), "committed",
                        "committed-slow"])
def sweep(request) -> Sweep:
    return request.getfixturevalue(request.param.replace("-", "_") + "_sweep")


def test_the_sweep_steps_and_captures(sweep, capsys):
    with capsys.disabled():
        print("\n" + "\n".join(sweep.attempts or (f"{sweep.folder.name}: committed",)))
    assert sweep_problems(sweep.folder) == []  # it can test the knee (the committed too)
    assert [s["concurrency"] for s in sweep.steps] == list(STEPS)
    assert all(r["status"] == 200 and r["finish_reason"] and r["ttft_s"] is not None
               for r in sweep.requests)
    assert {r["kind"] for r in sweep.requests} == {"completion", "chat"}
    names = sorted(sweep.norm)
    assert [int(n[:4]) for n in names] == list(range(len(names)))
    stamps = [int(n[5:-5]) for n in names]
    assert stamps == sorted(stamps)
    # a capture every 2 s while a step runs (a step of n seconds spans ≥ n/2 − 1 captures)
    for step in sweep.steps:
        inside = names.index(step["end_capture"]) - names.index(step["start_capture"])
        assert inside >= 2, step


def test_ttft_count_delta_equals_the_client_requests_per_step(sweep):
    for step in sweep.steps:
        n = len(sweep.step_requests(step))
        assert n == step["requests"] > 0
        assert sweep.ttft_delta(step)[float("inf")] == n, step
        end, start = sweep.norm[step["end_capture"]], sweep.norm[step["start_capture"]]
        assert pick(end, "modelserver_requests_total") - pick(
            start, "modelserver_requests_total") == n


def _delta_needed(server: dict[float, float], client: list[float], n: int) -> float:
    """The smallest δ (a multiple of 5 ms) with server(b) ≤ client(b + δ) at every b."""
    delta = 0.0
    for le, count in server.items():
        if le == float("inf"):
            continue
        while sum(t <= le + delta for t in client) < count and delta < 60:
            delta = round(delta + 0.005, 3)
    return delta


def test_server_ttft_fraction_brackets_the_client_one(sweep, capsys):
    lines = []
    for step in sweep.steps:
        client = [r["ttft_s"] for r in sweep.step_requests(step)]
        server = sweep.ttft_delta(step)
        n = len(client)
        for le, count in server.items():
            # the client's clock contains the server's
            assert sum(t <= le for t in client) <= count, (step["concurrency"], le)
        delta = _delta_needed(server, client, n)
        thr = sweep.slo.threshold_s
        at = (server[thr] / n, sum(t <= thr for t in client) / n)
        lines.append(f"c={step['concurrency']:>2}: n={n:>4}, TTFT ≤ {thr} s server "
                     f"{at[0]:.2f} client {at[1]:.2f}, client p50 "
                     f"{sorted(client)[n // 2] * 1000:.0f} ms, δ = {delta * 1000:.0f} ms")
        assert delta <= DELTA_MAX_S, lines[-1]
    with capsys.disabled():
        print(f"\n{sweep.folder.name}:\n  " + "\n  ".join(lines))


def test_slo_events_per_step_equal_the_step_requests(sweep):
    for step in sweep.steps:
        _good, total = sweep.step_events(step)
        assert total == len(sweep.step_requests(step)), step


def test_burn_is_low_at_low_concurrency_and_high_at_the_top_step(sweep, capsys):
    burns = {}
    for step in sweep.steps:
        good, total = sweep.step_events(step)
        assert 0 <= good <= total
        # the engine's good events are vLLM's bucket le=threshold
        assert good == sweep.ttft_delta(step)[sweep.slo.threshold_s]
        burns[step["concurrency"]] = sweep.burn_rate(good, total, sweep.slo.objective)
    with capsys.disabled():
        print(f"\n{sweep.folder.name}: burn per step "
              + ", ".join(f"c={c}: {b:.2f}" for c, b in burns.items()))
    assert burns[1] < 1
    assert burns[16] > TOP_BURN_MIN


def test_replay_finds_the_client_side_knee_overload_beyond_and_regression_above(
        sweep, tmp_path, capsys):
    """``fleetwatch slo replay`` of the sweep (:mod:`tests.sweep_checks`, the checks of
    ``tests/test_slo_replay.py``): capacity at the knee measured from the client's side
    (within 10 %), ``overload`` beyond it with the envelope at the knee, ``regression``
    with the envelope above it, and the concurrency component of the signal within 10 %
    of the client's in-flight concurrency ÷ knee at the top step."""
    slo = sweep.slo
    knee = client_knee(sweep.folder, slo)
    fractions = step_fractions(sweep.folder, slo.threshold_s)
    at_knee = replay_final(sweep.folder, tmp_path, knee, slo)["slo"]["slos"][0]
    top = float(STEPS[-1])  # the envelope above the knee: the top step is inside it
    above = replay_final(sweep.folder, tmp_path, top, slo)["slo"]["slos"][0]
    comp, expected = top_step_signal(sweep.folder, tmp_path, knee, slo)
    with capsys.disabled():
        print(f"\n{sweep.folder.name}: {slo}; TTFT ≤ {slo.threshold_s} s per step "
              + ", ".join(f"c={c}: {f:.2f}" for c, f in fractions.items())
              + f"; client knee {knee:g}; replay capacity {at_knee['capacity']} "
              f"({at_knee['capacity_evidence']}), {at_knee['state']} at envelope {knee:g}, "
              f"{above['state']} at {top:g}; top-step concurrency component "
              f"{comp:.2f} vs client {expected:.2f}")
    assert knee >= 1, fractions  # some step met the objective
    assert knee < STEPS[-1], fractions  # and the top step did not: there is a knee
    # first, because the rest depends on it: the client's concurrency reached vLLM's
    # engine (it did not on the 2-layer model, whose API server was the bottleneck)
    assert comp == pytest.approx(expected, rel=0.10), (
        f"concurrency component {comp:.2f} at the top step, the client's in-flight "
        f"concurrency ÷ knee {expected:.2f}")
    assert at_knee["capacity"] == pytest.approx(knee, rel=0.10), at_knee
    assert at_knee["state"] == "overload", at_knee["explanation"]
    assert above["state"] == "regression", above["explanation"]
    assert above["capacity"] < top  # burn lowered it from the envelope
