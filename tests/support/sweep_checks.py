"""Checks of the SLO engine against a real-vLLM concurrency sweep folder
(:func:`fleetwatch.demo.vllm_sweep.run_sweep`: ``steps.json``, ``requests.jsonl``,
``captures/<n>-<unix_ms>.prom``), measured from the client's side and replayed through
``fleetwatch slo replay``. Shared by ``tests/commands/test_slo_replay.py`` and
``tests/slo/test_vllm_sweeps.py`` (the committed sweeps) and
``benchmarks/bench_vllm_sweep.py`` (a live sweep).

* :func:`sweep_slo` — the TTFT SLO the sweep is judged by (:class:`SweepSLO`);
* :func:`client_knee` — the highest client concurrency step whose requests met that
  SLO's objective (on vLLM's clock: the step's TTFT histogram delta between the
  captures that bound it, as ``steps.json`` records them);
* :func:`client_in_flight` — the client's time-averaged requests in flight over an
  interval (Σ overlap of each request's ``[t_start, t_start + e2e_s]`` with it ÷ its
  length), measured independently of the engine;
* :func:`slo_file` / :func:`replay` — the sweep's SLO file at an envelope, and the
  replay command's exit code, stdout and stderr;
* :func:`sweep_problems` — why a sweep cannot test the engine's knee (empty: it can).

**The SLO follows the machine.** How fast the first token comes below the batch limit
is the machine's speed: a fixed threshold that one machine meets up to the batch limit
another misses from concurrency 2, which puts the knee at 1 or 2. What does not depend
on the machine is where requests start to wait: the
batch limit (``--max-num-seqs``). So :func:`sweep_slo` picks the tightest SLO that the
steps up to the batch limit meet with a margin — the lowest TTFT bucket boundary within
which each of them had ≥ :data:`STEP_MIN` of its first tokens, and an objective
:data:`OBJECTIVE_MARGIN` below the worst of them — the way an operator sets a threshold
from what the hardware does. The engine under test is told only the SLO; it must find
the knee, the overload beyond it and the signal itself. The objective follows too,
because with a fixed one the batch-limit step's quantile can lie anywhere in the
bucket below the threshold, and the capacity model's fit (linear from the batch limit
to the burning band's quantile) then lands up to 10 % above the step knee; with the
objective set so, the fit lands on the batch limit.

A sweep tests the knee only when, measured from the sweep itself and independent of the
engine under test:

* **the client's load reached vLLM**: over the top step's load (its captures before the drain),
  vLLM's e2e Little's law (the ``_sum`` delta ÷ Δt, read from the captures here) is at
  least :data:`REACH_MIN` of the client's time-averaged requests in flight (and at most
  its inverse). On a machine the server has to itself it reads a little below 1 (the rest
  is the HTTP exchange outside vLLM's app and the client's own event loop); when other
  jobs starve the machine the requests wait in the API server or the client, where no
  server metric counts them, and a server-side concurrency cannot match a client-side
  one. The bound is what the component check's 10 % tolerates: the engine also reads
  the running and waiting gauges, which count every request vLLM holds;
* **an SLO fits and the knee is sharp at the batch limit**: some candidate threshold
  fits (above), the step above the batch limit misses the objective (so the knee is
  the batch limit), and at most :data:`BREAK_MAX` of that step's requests met the
  threshold. The steps double, so only a sharp break (where requests start to wait)
  says where the knee is within 10 %; a starved machine that moves the break below the
  batch limit has the replay put capacity between the good 4 and the burning 8, where
  the client had no step.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from click.testing import CliRunner

from fleetwatch.cli import main

#: Candidate TTFT thresholds (seconds): the bucket boundaries of vLLM 0.32's TTFT
#: histogram from 20 ms to 250 ms (an SLO's good events are a bucket's count).
THRESHOLDS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.25)
#: The sweep server's ``--max-num-seqs``: beyond it requests wait for a slot.
BATCH_LIMIT = 8
#: Least share (ratio 0–1) of the requests of every step up to the batch limit that meet
#: the threshold :func:`sweep_slo` picks: :data:`OBJECTIVE_MARGIN` above
#: :data:`OBJECTIVE_MIN`, so that the floor never cuts the objective's margin (a step at
#: the batch limit just above 90 % would put the capacity model's crossing between the
#: good band 4 and band 8).
STEP_MIN = 0.94
#: How far (ratio) below the worst step up to the batch limit the objective is set.
OBJECTIVE_MARGIN = 0.04
#: The objective's range (ratio 0–1): below 90 % a TTFT SLO says little; above 99 % the
#: steps' 100–300 requests cannot show it.
OBJECTIVE_MIN, OBJECTIVE_MAX = 0.90, 0.99
BANDS = [1, 2, 4, 8, 16]
#: Least share of the client's in-flight requests vLLM must see at the top step (ratio;
#: at most its inverse): what the component check's 10 % tolerates.
REACH_MIN = 0.90
#: Most share (ratio) of the requests of the step above the knee that may meet the
#: threshold: that step is far beyond the knee, not near it.
BREAK_MAX = 0.5


@dataclass(frozen=True)
class SweepSLO:
    """A sweep's TTFT SLO: good is TTFT ≤ ``threshold_s`` (seconds, a vLLM bucket
    boundary) and the objective is ``objective`` (ratio 0–1)."""

    threshold_s: float
    objective: float

    def __str__(self) -> str:
        return f"TTFT ≤ {self.threshold_s * 1000:g} ms at {self.objective:.0%}"


def captures(folder: Path) -> list[Path]:
    """The sweep's capture files, in order."""
    return sorted((folder / "captures").glob("*.prom"))


def slo_spec(envelope: float, slo: SweepSLO, *, budget_consumed: float = 0.1,
             min_events: int = 50) -> dict:
    """The sweep's TTFT SLO file as a dict (``slo``, bands :data:`BANDS`). By default the
    window pair's burn threshold is 1 (0.1 × 10 min / 1 min) so that a band is judged
    burning exactly when capacity calls it burning."""
    return {
        "windows": [{"long": "1m", "short": "10s", "budget_consumed": budget_consumed}],
        "capacity": {"window": "1m", "min_events": min_events, "hysteresis_updates": 1},
        "slos": [{"name": "ttft", "selector": {"models": ["tiny-llm"]},
                  "sli": {"latency": {"metric": "ttft", "threshold_seconds": slo.threshold_s}},
                  "objectives": [{"target": slo.objective}],
                  "timeWindow": [{"duration": "10m"}],
                  "concurrency": {"envelope": envelope, "bands": BANDS}}],
    }


def slo_file(tmp_path: Path, envelope: float, slo: SweepSLO) -> Path:
    """:func:`slo_spec` written to ``tmp_path``."""
    p = tmp_path / f"slos-{envelope:g}.yaml"
    p.write_text(yaml.safe_dump(slo_spec(envelope, slo)), encoding="utf-8")
    return p


def no_nan(text: str) -> object:
    """Strict JSON: a ``NaN``/``Infinity`` token fails the test."""
    def bad(token: str) -> None:
        raise AssertionError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=bad)


def replay(*args: str) -> tuple[int, str, str]:
    """``fleetwatch slo replay ARGS…``: ``(exit code, stdout, stderr)``."""
    r = CliRunner().invoke(main, ["slo", "replay", *args])
    return r.exit_code, r.stdout, r.stderr


def _ttft_le(path: Path, threshold_s: float) -> tuple[float, float]:
    """(observations ≤ ``threshold_s``, all observations) of vLLM's TTFT histogram."""
    good = total = 0.0
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("vllm:time_to_first_token_seconds_bucket"):
            le = line[line.index('le="') + 4:].split('"', 1)[0]
            v = float(line.rsplit(" ", 1)[1])
            if le == "+Inf":
                total += v
            elif float(le) == threshold_s:
                good += v
    return good, total


def steps(folder: Path) -> list[dict]:
    """``steps.json``: per step its concurrency, bounding captures, times and requests."""
    out: list[dict] = json.loads((folder / "steps.json").read_text(encoding="utf-8"))
    return out


def step_fractions(folder: Path, threshold_s: float) -> dict[int, float]:
    """Client concurrency → fraction (ratio 0–1) of the step's requests with TTFT ≤
    ``threshold_s`` (vLLM's histogram delta over the step; its count is the client's
    request count)."""
    out: dict[int, float] = {}
    for step in steps(folder):
        g1, t1 = _ttft_le(folder / "captures" / step["end_capture"], threshold_s)
        g0, t0 = _ttft_le(folder / "captures" / step["start_capture"], threshold_s)
        assert t1 - t0 == step["requests"]  # the step's requests, as the client counted
        out[step["concurrency"]] = (g1 - g0) / (t1 - t0)
    return out


def sweep_slo(folder: Path) -> SweepSLO | None:
    """The SLO a sweep is judged by, chosen from its steps up to :data:`BATCH_LIMIT`
    (None when no candidate fits; :func:`sweep_problems` says why).

    The threshold is the lowest of :data:`THRESHOLDS` within which every step up to the
    batch limit had at least :data:`STEP_MIN` of its requests' first tokens; the
    objective is the worst of those steps' shares less :data:`OBJECTIVE_MARGIN` (floored
    to a percent, within :data:`OBJECTIVE_MIN`–:data:`OBJECTIVE_MAX`). So the SLO is the
    tightest one the batch limit's load meets with a margin, on the machine that ran
    the sweep: the batch-limit step's objective quantile sits just below the threshold,
    and the requests beyond the limit, which wait for a slot, break it.
    """
    for threshold in THRESHOLDS:
        worst = min(f for c, f in step_fractions(folder, threshold).items()
                    if c <= BATCH_LIMIT)
        if worst >= STEP_MIN:
            objective = math.floor((worst - OBJECTIVE_MARGIN) * 100 + 1e-9) / 100
            return SweepSLO(threshold, min(OBJECTIVE_MAX, max(OBJECTIVE_MIN, objective)))
    return None


def client_knee(folder: Path, slo: SweepSLO) -> float:
    """The highest client concurrency step that met ``slo``'s objective (0 when none
    did)."""
    return max((float(c) for c, f in step_fractions(folder, slo.threshold_s).items()
                if f >= slo.objective), default=0.0)


def client_in_flight(folder: Path, t0: float, t1: float) -> float:
    """Time-averaged requests the client had in flight over [t0, t1] (Unix seconds)."""
    busy = 0.0
    for line in (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        a, b = r["t_start"], r["t_start"] + r["e2e_s"]
        busy += max(0.0, min(b, t1) - max(a, t0))
    return busy / (t1 - t0)


def stamp(p: Path) -> float:
    """A capture's Unix time (seconds) from the ``<unix_ms>`` in its name."""
    return int(re.findall(r"\d{12,14}", p.name)[-1]) / 1000


def load_captures(folder: Path) -> list[Path]:
    """The top step's periodic captures taken while the client still started requests:
    after the step began and no later than the start of its last request. Between two of
    them the load is the step's own, neither the ramp from the empty system before nor
    the drain after (when no request starts and the queue empties, vLLM's e2e Little's
    law still counts the waits of requests that started before the interval, and reads
    above the client's in-flight)."""
    top = steps(folder)[-1]
    caps = captures(folder)
    names = [p.name for p in caps]
    first, end = names.index(top["start_capture"]) + 1, names.index(top["end_capture"])
    step = str(top["concurrency"])
    load_end = max(json.loads(line)["t_start"] for line in
                   (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines()
                   if json.loads(line)["step"] == step)
    inside = [p for p in caps[first:end] if stamp(p) <= load_end]
    assert len(inside) >= 2, (top, [p.name for p in caps[first:end]], load_end)
    return inside


def top_step_signal(folder: Path, tmp_path: Path, knee: float,
                    slo: SweepSLO) -> tuple[float, float]:
    """Replay up to the last full capture interval of the top step's load
    (:func:`load_captures`) with ``slo`` and the envelope at ``knee``: ``(concurrency
    component of the signal, client in-flight concurrency over that interval ÷ knee)``."""
    caps = captures(folder)
    inside = load_captures(folder)
    upto = caps[: caps.index(inside[-1]) + 1]
    code, out, err = replay("--slos", str(slo_file(tmp_path, knee, slo)), "--each",
                            *map(str, upto))
    assert code == 0, err
    lines = [no_nan(x) for x in out.splitlines()]
    assert len(lines) == len(upto)
    last = lines[-1]
    assert isinstance(last, dict)
    comp = float(last["autoscaling"]["models"][0]["components"]["concurrency"])
    return comp, client_in_flight(folder, stamp(upto[-2]), stamp(upto[-1])) / knee


def replay_final(folder: Path, tmp_path: Path, envelope: float, slo: SweepSLO) -> dict:
    """The final JSON (``{"slo": …, "autoscaling": …}``) of replaying the whole sweep
    with ``slo`` and the envelope at ``envelope``."""
    code, out, err = replay("--slos", str(slo_file(tmp_path, envelope, slo)),
                            *map(str, captures(folder)))
    assert code == 0, err
    doc = no_nan(out)
    assert isinstance(doc, dict)
    return doc


def _e2e_sum(path: Path) -> float:
    """Σ of vLLM's ``e2e_request_latency_seconds_sum`` (seconds) in a capture."""
    return sum(float(line.rsplit(" ", 1)[1])
               for line in path.read_text(encoding="utf-8").splitlines()
               if line.startswith("vllm:e2e_request_latency_seconds_sum"))


def top_step_reach(folder: Path) -> tuple[float, float]:
    """``(vLLM's e2e Little's law, the client's in-flight)`` (requests) over the top
    step's load (:func:`load_captures`: from its first periodic capture to its last one
    before the drain)."""
    inside = load_captures(folder)
    a, b = inside[0], inside[-1]
    t0, t1 = stamp(a), stamp(b)
    return (_e2e_sum(b) - _e2e_sum(a)) / (t1 - t0), client_in_flight(folder, t0, t1)


def sweep_problems(folder: Path) -> list[str]:
    """Why the sweep cannot test the engine's knee (see the module doc); empty when it
    can."""
    problems = []
    server, client = top_step_reach(folder)
    if not REACH_MIN * client <= server <= client / REACH_MIN:
        problems.append(f"vLLM saw {server:.2f} of the client's {client:.2f} requests in "
                        f"flight at the top step ({server / client:.1%}, not within "
                        f"{REACH_MIN:.0%}–{1 / REACH_MIN:.0%}): the machine starved the "
                        "server or stalled")
    slo = sweep_slo(folder)
    if slo is None:
        worst = {t: min(f for c, f in step_fractions(folder, t).items() if c <= BATCH_LIMIT)
                 for t in THRESHOLDS}
        problems.append(f"no threshold within which every step up to the batch limit "
                        f"{BATCH_LIMIT} had {STEP_MIN:.0%} of its first tokens (worst step "
                        + ", ".join(f"{t * 1000:g} ms: {f:.3f}" for t, f in worst.items())
                        + ")")
        return problems
    fractions = step_fractions(folder, slo.threshold_s)
    knee = client_knee(folder, slo)
    top = max(fractions)
    if knee != BATCH_LIMIT:
        problems.append(f"{slo}: the knee is at concurrency {knee:g}, not at the batch "
                        f"limit {BATCH_LIMIT} (steps " + ", ".join(
                            f"c={c}: {f:.3f}" for c, f in fractions.items()) + ")")
        return problems
    above = [f for c, f in fractions.items() if c > knee]
    if knee < top and above[0] > BREAK_MAX:
        problems.append(f"{slo}: the step above the knee {knee:g} met the threshold for "
                        f"{above[0]:.3f} of its requests (> {BREAK_MAX}): a soft knee")
    return problems
