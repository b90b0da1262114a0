"""The live autoscaling experiment: one trace segment, replayed by aiperf on real servers,
once per policy; the result table from the client's records.

    python benchmarks/autoscale/run.py --segment 0:900 --policy fleetwatch --policy static

For each policy: HAProxy, Prometheus and the policy's starting replicas (one; the static
pool at its size), then aiperf replays the mapped segment (`MAPPING`,
``fleetwatch.autoscale.trace.map_trace``) while `scaler.FleetController` resizes the fleet
every sync period with the HPA (``fleetwatch.autoscale.hpa``, durations divided by the
time compression). The results (`summarize`) are computed from aiperf's per-request
records alone: every request of the segment must appear once (sent, with TTFT or an
error); a request the client never got an answer for is dropped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import itertools

from benchmarks.autoscale import twin
from benchmarks.autoscale.fleet import (
    MODEL,
    HAProxy,
    Prometheus,
    stop_process,
    write_fleet_files,
)
from benchmarks.autoscale.load import AiperfRun, ClientRecord, default_tokenizer, read_records
from benchmarks.autoscale.scaler import FleetController, measure
from benchmarks.autoscale.svg import timeline_svg

from fleetwatch.autoscale.hpa import DEFAULT_BEHAVIOR, HPA, Behavior, HPASpec
from fleetwatch.autoscale.policies import policy as get_policy
from fleetwatch.autoscale.trace import (
    Request,
    TraceMapping,
    map_trace,
    read_azure_csv,
    segment,
    write_mooncake_jsonl,
)
from fleetwatch.slo.outputs.headroom import HEADROOM_WINDOW_SECONDS

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "workloads" / "AzureLLMInferenceTrace_code.csv"
#: The production code trace onto one calibrated llm_sim replica: 2× faster arrivals (the
#: fastest at which a pool of `Experiment.max_replicas` replicas meets the TTFT objective
#: in every trace minute of the first 15, by `sizing`); tokens ÷ 16, prompts clamped to
#: 16–128 tokens (the replica's KV budget holds a few of them) and outputs to 16–48 (the
#: code trace's outputs are mostly under 16 tokens, which would leave no decode phase to
#: measure).
MAPPING = TraceMapping(time_compression=2.0, token_scale=1 / 16, min_input_tokens=16,
                       max_input_tokens=128, min_output_tokens=16, max_output_tokens=48)
#: The SLOs judged from the client's records (the sidecars' SLO file uses the same TTFT).
TTFT_SLO_S = 0.1
ITL_SLO_S = 0.025
OBJECTIVE = 0.99
#: Replay seconds every run continues after the tail's stabilization window.
TAIL_SLACK_S = 10.0
#: Width of the windows of the attainment timeline, replay seconds.
WINDOW_S = 5.0
#: The niceness the experiment runs at (its servers, sidecars, Prometheus and aiperf
#: inherit it), when the user may raise priority: on a shared machine, other work
#: would otherwise take the CPU time the replicas' timed steps need, and the run would
#: measure the machine rather than the policies. It uses far less than a core.
NICENESS = -10


def raise_priority(niceness: int = NICENESS) -> int:
    """Run at ``niceness`` if allowed (root or ``CAP_SYS_NICE``); the niceness now."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > niceness:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except PermissionError:
        print(f"fleetwatch: cannot raise priority to nice {niceness}: the run shares the "
              "CPU with the rest of the machine", file=sys.stderr)
    return os.getpriority(os.PRIO_PROCESS, 0)


def sidecar_slos(headroom_window_s: float) -> dict[str, Any]:
    """The sidecars' SLO file: the TTFT SLO judged from the client's records, and
    ``autoscaling.headroom_window`` = ``headroom_window_s`` (replay seconds: the sidecars
    run on the replay's clock)."""
    return {
        "windows": [{"long": "1m", "short": "10s", "budget_consumed": 0.1}],
        "capacity": {"window": "1m", "min_events": 50, "hysteresis_updates": 2},
        "slos": [{"name": "llm-ttft", "selector": {"models": [MODEL]},
                  "sli": {"latency": {"metric": "ttft", "threshold_seconds": TTFT_SLO_S}},
                  "objectives": [{"target": OBJECTIVE}], "timeWindow": [{"duration": "1h"}],
                  "concurrency": {"envelope": 8, "bands": [1, 2, 4, 8, 16]}}],
        "autoscaling": {"headroom_window": headroom_window_s},
    }


@dataclass(frozen=True, slots=True)
class Sample:
    """One sync period of the scaler: replay time (s), replicas, ready, metric, desired,
    and the machine's 1-minute load average then (the result says how busy it was)."""

    t_s: float
    replicas: int
    ready: int
    metric: float
    desired: int
    load1: float = math.nan


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's row of the result table (times in replay seconds)."""

    policy: str
    requests: int
    answered: int
    errors: int
    dropped: int
    ttft_attainment: float
    goodput: float
    replica_seconds: float
    ratio_to_static: float | None
    scale_events: int
    reversals: int
    recovery_s: float | None
    peak_replicas: int
    duration_s: float


def _attained(record: ClientRecord) -> bool:
    return record.error is None and record.ttft_s is not None and record.ttft_s <= TTFT_SLO_S


def mean_itl(record: ClientRecord) -> float:
    """A request's mean inter-token latency (s) as aiperf defines it, ``(request latency −
    TTFT) / (output tokens − 1)``: per token whether the server streams every token or
    chunks of them (``--stream-interval``), where the gaps between chunks would not be;
    0 for a request of one token."""
    if record.output_tokens < 2 or record.latency_s is None or record.ttft_s is None:
        return 0.0
    return (record.latency_s - record.ttft_s) / (record.output_tokens - 1)


def _good(record: ClientRecord) -> bool:
    return _attained(record) and mean_itl(record) <= ITL_SLO_S


def attainment_windows(records: list[ClientRecord], t0: float) -> list[tuple[float, int, float]]:
    """Per `WINDOW_S` window of request starts: (window start s, requests, TTFT attainment)."""
    buckets: dict[int, list[ClientRecord]] = {}
    for r in records:
        buckets.setdefault(int((r.start_s - t0) // WINDOW_S), []).append(r)
    return [(k * WINDOW_S, len(v), sum(map(_attained, v)) / len(v))
            for k, v in sorted(buckets.items())]


def _recovery(windows: list[tuple[float, int, float]]) -> float | None:
    """Seconds from the start of the busiest window until a window is back at the
    objective (0 if the busiest window itself is; None if none is after it)."""
    if not windows:
        return None
    busiest = max(windows, key=lambda w: w[1])
    for start, _, attained in windows:
        if start >= busiest[0] and attained >= OBJECTIVE:
            return start - busiest[0]
    return None


def _reversals(samples: list[Sample], window_s: float) -> int:
    """Changes of direction of the replica count within ``window_s`` of the previous change."""
    changes = [(b.t_s, b.desired - a.desired) for a, b in itertools.pairwise(samples)
               if b.desired != a.desired]
    return sum(1 for (t1, d1), (t2, d2) in itertools.pairwise(changes)
               if (d1 > 0) != (d2 > 0) and t2 - t1 <= window_s)


def summarize(name: str, sent: list[Request], records: list[ClientRecord], samples: list[Sample],
              replica_seconds: float, static_replica_seconds: float | None,
              window_s: float, duration_s: float) -> PolicyResult:
    """The result row of one run (see the module docstring)."""
    t0 = min((r.start_s for r in records), default=0.0)
    answered = [r for r in records if r.error is None and r.ttft_s is not None]
    windows = attainment_windows(records, t0)
    return PolicyResult(
        policy=name, requests=len(sent), answered=len(answered),
        errors=sum(1 for r in records if r.error is not None),
        dropped=len(sent) - len(records),
        ttft_attainment=sum(map(_attained, records)) / len(sent) if sent else math.nan,
        goodput=sum(map(_good, records)) / len(sent) if sent else math.nan,
        replica_seconds=replica_seconds,
        ratio_to_static=(replica_seconds / static_replica_seconds
                         if static_replica_seconds else None),
        scale_events=sum(1 for a, b in itertools.pairwise(samples)
                         if b.desired != a.desired),
        reversals=_reversals(samples, window_s), recovery_s=_recovery(windows),
        peak_replicas=max((s.replicas for s in samples), default=0), duration_s=duration_s)


@dataclass(frozen=True, slots=True)
class Experiment:
    """What every policy of one run shares: the mapped requests, the mapping, the fleet's
    bounds, the HPA's scale-down stabilization window and the sidecars' burst-headroom
    window (``autoscaling.headroom_window``), both in trace seconds and compressed like
    every HPA duration (defaults: Kubernetes' 300 s and the sidecar's own default, the
    full experiment's), and the run's length in replay seconds (the segment, then a tail
    of one stabilization window, one headroom window — fleetwatch's signal keeps a
    burst's headroom that long, then the HPA waits out its window — plus `TAIL_SLACK_S`,
    where scale-in shows and quiet time costs replica-seconds for every policy alike;
    `run_policy` adds the longest cold start the sidecars measured)."""

    requests: tuple[Request, ...]
    mapping: TraceMapping
    segment_s: float
    max_replicas: int = 4
    static_replicas: int = 4
    scale_down_window_s: float = DEFAULT_BEHAVIOR.scale_down.stabilization_window_seconds
    headroom_window_s: float = HEADROOM_WINDOW_SECONDS

    @property
    def behavior(self) -> Behavior:
        """The HPA's behaviour in trace seconds: Kubernetes' defaults but for the
        scale-down stabilization window."""
        return replace(DEFAULT_BEHAVIOR, scale_down=replace(
            DEFAULT_BEHAVIOR.scale_down, stabilization_window_seconds=self.scale_down_window_s))

    @property
    def run_s(self) -> float:
        """Replay seconds each policy runs when the fleet answers the segment's last
        request within it (see :meth:`ends_s`)."""
        return self.mapping.seconds(self.segment_s) + self.tail_s

    @property
    def tail_s(self) -> float:
        """Replay seconds of the tail: one stabilization window, one headroom window and
        `TAIL_SLACK_S`."""
        seconds = self.mapping.seconds
        return (seconds(self.scale_down_window_s) + seconds(self.headroom_window_s)
                + TAIL_SLACK_S)

    def ends_s(self, drained_s: float) -> float:
        """When a run ends (replay seconds) whose client had every answer at
        ``drained_s``: the tail follows the later of the segment's end and the last
        answer, so that a fleet still working off a backlog (a slow or busy machine)
        has the whole tail to scale in."""
        return max(self.mapping.seconds(self.segment_s), drained_s) + self.tail_s


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's raw outcome: aiperf's records, the scaler's samples, replica-seconds,
    the run's length and each replica's cold start, from its start to its joining
    HAProxy, and the longest cold start the sidecars measured (replay seconds)."""

    records: list[ClientRecord]
    samples: list[Sample]
    replica_seconds: float
    duration_s: float
    cold_starts_s: tuple[float, ...]
    sidecar_cold_start_s: float

    @property
    def cold_start_s(self) -> float:
        """The replicas' mean cold start (replay seconds; 0 without a replica started)."""
        return statistics.fmean(self.cold_starts_s) if self.cold_starts_s else 0.0


def run_policy(name: str, exp: Experiment, workdir: Path) -> PolicyRun:
    """Replay ``exp.requests`` against a fleet scaled by policy ``name`` until
    ``exp.ends_s`` of the moment aiperf had every answer (``exp.run_s`` replay seconds
    when that was within the segment)."""
    policy = get_policy(name)
    workdir.mkdir(parents=True, exist_ok=True)
    files = write_fleet_files(workdir, sidecar_slos(exp.mapping.seconds(exp.headroom_window_s)))
    haproxy, prometheus = HAProxy(workdir, exp.max_replicas), Prometheus(workdir)
    haproxy.start()
    prometheus.start()
    fleet = FleetController(files, haproxy, prometheus, exp.max_replicas)
    samples: list[Sample] = []
    client: subprocess.Popen[bytes] | None = None
    try:
        start = exp.static_replicas if policy.target is None else 1
        fleet.scale_to(start)
        fleet.wait_ready(start, 300)
        time.sleep(3)  # the sidecars' first scrapes reach Prometheus
        trace = workdir / "trace.jsonl"
        trace.write_text(write_mooncake_jsonl(exp.requests))
        load = AiperfRun(haproxy.url, MODEL, trace, workdir / "aiperf", default_tokenizer())
        c = exp.mapping.time_compression
        spec = (HPASpec(1, exp.max_replicas, policy.target, exp.behavior) if policy.target
                else None)
        hpa = HPA(spec.compressed(c)) if spec else None
        period = spec.sync_period_seconds / c if spec else 1.0
        client = load.start()
        fleet.account()
        fleet.replica_seconds = 0.0
        t0 = time.monotonic()
        hold = 0.0  # fleetwatch's signal holds its peak for one measured cold start
        drained: float | None = None  # when aiperf had every answer (replay seconds)
        while drained is None or time.monotonic() - t0 < exp.ends_s(drained) + hold:
            time.sleep(period)
            now = time.monotonic() - t0
            if drained is None and client.poll() is not None:
                drained = now
            hold = max(hold, measured_cold_start(prometheus))
            current, pods = fleet.current, fleet.ready_names()
            metric = measure(policy, prometheus, current, pods) if hpa else math.nan
            desired = hpa.step(now, current, len(pods), metric) if hpa else current
            samples.append(Sample(now, current, len(pods), metric, desired, os.getloadavg()[0]))
            fleet.scale_to(desired)
        fleet.account()
        duration = time.monotonic() - t0
        if not (workdir / "aiperf" / "profile_export.jsonl").exists():
            raise RuntimeError(f"aiperf exited {client.returncode} without records: "
                               f"see {workdir}/aiperf.log")
        return PolicyRun(read_records(workdir / "aiperf"), samples, fleet.replica_seconds,
                         duration, tuple(fleet.cold_starts), hold)
    finally:
        if client is not None:
            stop_process(client)
        fleet.stop()
        haproxy.stop()
        prometheus.stop()


def measured_cold_start(prometheus: Prometheus) -> float:
    """The longest cold start the fleet's sidecars measured (seconds, 0 before any):
    fleetwatch's signal holds its peak that long (a real-time span the replay does not
    compress), so every run's tail is longer by it and scale-in still shows within the
    run however slow this machine starts a replica."""
    rows = prometheus.query("max(fleetwatch_model_cold_start_seconds)")
    return float(rows[0]["value"][1]) if rows else 0.0


def load_segment(start_s: float, duration_s: float, mapping: TraceMapping) -> list[Request]:
    """The mapped requests of the trace's ``[start, start + duration)`` (trace seconds)."""
    with TRACE.open() as f:
        return map_trace(segment(read_azure_csv(f), start_s, duration_s), mapping)


def run_experiment(exp: Experiment, names: list[str], workdir: Path) -> dict[str, Any]:
    """Every policy of ``names`` (the static pool first) on ``exp``; the result document."""
    names = sorted(names, key=lambda n: n != "static")
    results, timelines = [], {}
    twins: list[dict[str, Any]] = []
    static_rs: float | None = None
    window = exp.mapping.seconds(exp.scale_down_window_s)
    for name in names:
        run = run_policy(name, exp, workdir / name)
        if name == "static":
            static_rs = run.replica_seconds
        results.append(summarize(name, list(exp.requests), run.records, run.samples,
                                 run.replica_seconds, static_rs, window, run.duration_s))
        t0 = min((r.start_s for r in run.records), default=0.0)
        timelines[name] = {"samples": [asdict(s) for s in run.samples],
                           "attainment": attainment_windows(run.records, t0),
                           "cold_starts_s": list(run.cold_starts_s),
                           "sidecar_cold_start_s": run.sidecar_cold_start_s}
        twins.append(twin.row(twin.compare(exp, twin.LiveRun(
            name, run.duration_s, run.cold_start_s, results[-1].ttft_attainment,
            run.replica_seconds), twin.SLO(TTFT_SLO_S, ITL_SLO_S, OBJECTIVE))))
        print(json.dumps(asdict(results[-1])), flush=True)
        print(json.dumps(twins[-1]), flush=True)
    return {"segment_s": exp.segment_s, "requests": len(exp.requests),
            "mapping": asdict(exp.mapping), "run_s": exp.run_s,
            "scale_down_window_s": exp.scale_down_window_s,
            "headroom_window_s": exp.headroom_window_s,
            "slo": {"ttft_s": TTFT_SLO_S, "itl_s": ITL_SLO_S, "objective": OBJECTIVE},
            "results": [asdict(r) for r in results], "timelines": timelines, "twin": twins}


def load_range(samples: list[dict[str, Any]]) -> str:
    """The 1-minute load average's range over a policy's samples, ``"min–max"``."""
    loads = [s["load1"] for s in samples if not math.isnan(s.get("load1", math.nan))]
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "—"


def markdown_table(doc: dict[str, Any]) -> str:
    """The result document's table, as in docs/autoscaling.md, with the machine's load
    during each policy's run."""
    head = ("| policy | TTFT attainment | TTFT+ITL goodput | replica-s | ÷ static | peak | "
            "scale events | reversals | back under SLO (s) | errors | dropped | load |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in doc["results"]:
        ratio = "—" if r["ratio_to_static"] is None else f"{r['ratio_to_static']:.2f}"
        back = "never" if r["recovery_s"] is None else f"{r['recovery_s']:.0f}"
        load = load_range(doc["timelines"].get(r["policy"], {}).get("samples", []))
        rows.append(f"| {r['policy']} | {r['ttft_attainment']:.1%} | {r['goodput']:.1%} | "
                    f"{r['replica_seconds']:.0f} | {ratio} | {r['peak_replicas']} | "
                    f"{r['scale_events']} | {r['reversals']} | {back} | {r['errors']} | "
                    f"{r['dropped']} | {load} |")
    return head + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the experiment; write ``<out>.json`` and ``<out>.svg``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segment", default="0:900",
                        help="START:DURATION of the trace, trace seconds (default 0:900)")
    parser.add_argument("--policy", action="append",
                        help="policy to run (repeatable; default: all, static first)")
    parser.add_argument("--compression", type=float, default=MAPPING.time_compression,
                        help="time compression of the trace (default %(default)s)")
    parser.add_argument("--max-replicas", type=int, default=4)
    parser.add_argument("--static-replicas", type=int, default=4,
                        help="size of the static pool (sized for the segment's peak)")
    parser.add_argument("--scale-down-window", type=float,
                        default=DEFAULT_BEHAVIOR.scale_down.stabilization_window_seconds,
                        help="HPA scale-down stabilization window, trace seconds "
                             "(default Kubernetes' %(default)s)")
    parser.add_argument("--headroom-window", type=float, default=HEADROOM_WINDOW_SECONDS,
                        help="the sidecars' autoscaling.headroom_window, trace seconds "
                             "(default the sidecar's %(default)s)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/fleetwatch-autoscale"))
    parser.add_argument("--out", type=Path, required=True,
                        help="result path without suffix (.json and .svg are written)")
    args = parser.parse_args(argv)
    # SIGTERM (a timeout, a CI cancel) unwinds like Ctrl-C: every finally stops its servers
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    start, duration = (float(x) for x in args.segment.split(":"))
    mapping = replace(MAPPING, time_compression=args.compression)
    exp = Experiment(tuple(load_segment(start, duration, mapping)), mapping, duration,
                     args.max_replicas, args.static_replicas, args.scale_down_window,
                     args.headroom_window)
    names = args.policy or ["static", "fleetwatch", "production-stack", "wva", "hpa-utilization"]
    niceness = raise_priority()
    doc = run_experiment(exp, names, args.workdir)
    doc["segment_start_s"] = start
    doc["niceness"] = niceness
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    args.out.with_suffix(".svg").write_text(timeline_svg(doc["timelines"], OBJECTIVE))
    print(markdown_table(doc))
    print(twin.table(doc["twin"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
