"""Checks of the SLO engine against a real-vLLM concurrency sweep folder
(:func:`fleetwatch.demo.vllm_sweep.run_sweep`: ``steps.json``, ``requests.jsonl``,
``captures/<n>-<unix_ms>.prom``), measured from the client's side and replayed through
``fleetwatch slo replay``. Shared by ``tests/test_slo_replay.py`` (the committed sweep)
and ``tests/test_vllm_scenario.py`` (a live sweep on the session vLLM).

* :func:`client_knee` — the highest client concurrency step whose requests met the TTFT
  objective (≥ ``OBJECTIVE`` within ``THRESHOLD_S`` on vLLM's clock: the step's TTFT
  histogram delta between the captures that bound it, as ``steps.json`` records them);
* :func:`client_in_flight` — the client's time-averaged requests in flight over an
  interval (Σ overlap of each request's ``[t_start, t_start + e2e_s]`` with it ÷ its
  length), measured independently of the engine;
* :func:`slo_file` / :func:`replay` — the sweep's TTFT SLO at an envelope, and the replay
  command's exit code, stdout and stderr.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from fleetwatch.cli import main

THRESHOLD_S = 0.02  # a TTFT bucket boundary of vLLM 0.32
OBJECTIVE = 0.95
BANDS = [1, 2, 4, 8, 16]


def captures(folder: Path) -> list[Path]:
    """The sweep's capture files, in order."""
    return sorted((folder / "captures").glob("*.prom"))


def slo_file(tmp_path: Path, envelope: float) -> Path:
    """The sweep's TTFT SLO. The window pair's burn threshold is 1 (0.1 × 10 min / 1 min)
    so that a band is judged burning exactly when capacity calls it burning."""
    spec = {
        "windows": [{"long": "1m", "short": "10s", "budget_consumed": 0.1}],
        "capacity": {"window": "1m", "min_events": 50, "hysteresis_updates": 1},
        "slos": [{"name": "ttft", "selector": {"models": ["tiny-llm"]},
                  "sli": {"latency": {"metric": "ttft", "threshold_seconds": THRESHOLD_S}},
                  "objectives": [{"target": OBJECTIVE}], "timeWindow": [{"duration": "10m"}],
                  "concurrency": {"envelope": envelope, "bands": BANDS}}],
    }
    p = tmp_path / f"slos-{envelope:g}.yaml"
    p.write_text(yaml.safe_dump(spec), encoding="utf-8")
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


def _ttft_le(path: Path) -> tuple[float, float]:
    """(observations ≤ THRESHOLD_S, all observations) of vLLM's TTFT histogram."""
    good = total = 0.0
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("vllm:time_to_first_token_seconds_bucket"):
            v = float(line.rsplit(" ", 1)[1])
            if f'le="{THRESHOLD_S}"' in line:
                good += v
            elif 'le="+Inf"' in line:
                total += v
    return good, total


def steps(folder: Path) -> list[dict]:
    """``steps.json``: per step its concurrency, bounding captures, times and requests."""
    out: list[dict] = json.loads((folder / "steps.json").read_text(encoding="utf-8"))
    return out


def step_fractions(folder: Path) -> dict[int, float]:
    """Client concurrency → fraction of the step's requests with TTFT ≤ THRESHOLD_S
    (vLLM's histogram delta over the step; its count is the client's request count)."""
    out: dict[int, float] = {}
    for step in steps(folder):
        g1, t1 = _ttft_le(folder / "captures" / step["end_capture"])
        g0, t0 = _ttft_le(folder / "captures" / step["start_capture"])
        assert t1 - t0 == step["requests"]  # the step's requests, as the client counted
        out[step["concurrency"]] = (g1 - g0) / (t1 - t0)
    return out


def client_knee(folder: Path) -> float:
    """The highest client concurrency step that met the objective (0 when none did)."""
    return max((float(c) for c, f in step_fractions(folder).items() if f >= OBJECTIVE),
               default=0.0)


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


def top_step_signal(folder: Path, tmp_path: Path, knee: float) -> tuple[float, float]:
    """Replay up to the last full capture interval inside the top step (not the drain)
    with the envelope at ``knee``: ``(concurrency component of the signal, client
    in-flight concurrency over that interval ÷ knee)``."""
    top = steps(folder)[-1]
    caps = captures(folder)
    names = [p.name for p in caps]
    upto = caps[: names.index(top["end_capture"])]
    code, out, err = replay("--slos", str(slo_file(tmp_path, envelope=knee)), "--each",
                            *map(str, upto))
    assert code == 0, err
    lines = [no_nan(x) for x in out.splitlines()]
    assert len(lines) == len(upto)
    last = lines[-1]
    assert isinstance(last, dict)
    comp = float(last["autoscaling"]["models"][0]["components"]["concurrency"])
    return comp, client_in_flight(folder, stamp(upto[-2]), stamp(upto[-1])) / knee


def replay_final(folder: Path, tmp_path: Path, envelope: float) -> dict:
    """The final JSON (``{"slo": …, "autoscaling": …}``) of replaying the whole sweep
    with the envelope at ``envelope``."""
    code, out, err = replay("--slos", str(slo_file(tmp_path, envelope=envelope)),
                            *map(str, captures(folder)))
    assert code == 0, err
    doc = no_nan(out)
    assert isinstance(doc, dict)
    return doc
