"""Scenarios of the recording rules (:mod:`fleetwatch.alerts.recording`): not an alert
family, but its rules are in the same files and get the same behaviour tests — each
recorded name with its labels and its value, summed over two replicas (the autoscaling
signal also with a third whose sidecar is not scraped: left out)."""

from __future__ import annotations

from decimal import Decimal

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.families.slo_context import EVENTS_PER_STEP
from fleetwatch.alerts.numbers import error_budget, num
from fleetwatch.alerts.scenarios import EVENTS, GOOD, STEP, Suite, TestGroup, linear
from fleetwatch.promql import selector, string


def recording_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: every per-model name with its labels on exactly representable values
    (sums over replicas, ratios, means, a median), and the first SLO's burn rates and
    budget remaining (rounded: promtool compares floats exactly)."""
    g = TestGroup("Recording rules: names, labels and values (summed over two replicas)")
    steps = 10
    _add_model_series(g, steps)
    _expect_model_records(g, steps)
    _check_burn_rates(suite, g, steps)
    return [g]


#: The model every recording scenario is about.
_MODEL = {"model": "model-a", "model_version": "1", "backend": "vllm"}


def _add_model_series(g: TestGroup, steps: int) -> None:
    """The input series: two replicas' per-model series, rollout verdicts, a GPU's
    memory and two sidecars' quota shares."""
    mk = _MODEL
    reps = ("sidecar-a:9810", "sidecar-b:9810")
    for inst in reps:  # per replica: 7.5 ok/s and 2.5 errors/s → 15 and 5 in total
        g.add("modelserver_requests_total", {**mk, "outcome": "success", "instance": inst},
              linear(450, steps))
        g.add("modelserver_requests_total", {**mk, "outcome": "error", "instance": inst},
              linear(150, steps))
        h = "modelserver_request_duration_seconds"
        g.add(f"{h}_count", {**mk, "instance": inst}, linear(240, steps))
        g.add(f"{h}_sum", {**mk, "instance": inst}, linear(120, steps))
        for le, per in (("0.25", 0), ("0.75", 240), ("+Inf", 240)):
            g.add(f"{h}_bucket", {**mk, "le": le, "instance": inst}, linear(per, steps))
        g.add("modelserver_tokens_total", {**mk, "token_type": "output", "instance": inst},
              linear(3000, steps))
        g.add("modelserver_prefix_cache_queries_total", {**mk, "instance": inst},
              linear(600, steps))
        g.add("modelserver_prefix_cache_hits_total", {**mk, "instance": inst},
              linear(150, steps))
        g.add("modelserver_requests_active", {**mk, "state": "running", "instance": inst},
              linear(0, steps, 3))
        g.add("modelserver_kv_cache_usage_ratio", {**mk, "instance": inst},
              linear(0, steps, 0.25 if inst.startswith("sidecar-a") else 0.5))
        g.add("fleetwatch_slo_concurrency", {**mk, "instance": inst}, linear(0, steps, 1.5))
        g.add("fleetwatch_autoscaling_signal_ratio", {**mk, "instance": inst},
              linear(0, steps, 0.75))
        g.add("up", {"instance": inst}, linear(0, steps, 1))
    # a third sidecar Prometheus no longer scrapes, its last signal still in the store:
    # left out of the sum (the health filter)
    g.add("fleetwatch_autoscaling_signal_ratio", {**mk, "instance": "sidecar-c:9810"},
          linear(0, steps, 2))
    g.add("up", {"instance": "sidecar-c:9810"}, linear(0, steps, 0))
    for inst, verdict in (("sidecar-a:9810", "worse"), ("sidecar-b:9810", "same")):
        for v in ("same", "worse"):
            g.add("fleetwatch_rollout_verdict", {"model": "model-a", "baseline": "1",
                                                 "candidate": "2", "verdict": v,
                                                 "instance": inst},
                  linear(0, steps, 1 if v == verdict else 0))
    g.add("modelserver_gpu_memory_used_bytes", {"gpu_uuid": "GPU-1", "backend": "dcgm"},
          linear(0, steps, 2**33))
    g.add("modelserver_gpu_memory_total_bytes", {"gpu_uuid": "GPU-1", "backend": "dcgm"},
          linear(0, steps, 2**34))
    for inst, share in zip(reps, (0.25, 0.5), strict=True):  # two sidecars' shares of GPUs
        quota = {"team": "search", "resource": "gpus", "instance": inst}
        g.add("fleetwatch_quota_usage", quota, linear(0, steps, share))
        g.add("fleetwatch_quota_limit", quota, linear(0, steps, 1))
        cap = {**quota, "model": "model-a", "resource": "instances"}
        g.add("fleetwatch_quota_model_usage", cap, linear(0, steps, 2))
        g.add("fleetwatch_quota_model_limit", cap, linear(0, steps, 3))


def _expect_model_records(g: TestGroup, steps: int) -> None:
    """The expected value of every per-model, per-GPU and per-team recording rule."""
    mk = _MODEL

    def expect(name: str, labels: dict[str, str], value: float, match: str = "") -> None:
        # round(1000 × …): promtool compares floats exactly, Prometheus' rate() is not exact
        g.exprs.append({"expr": f"round(1000 * {name}{match})", "eval_time": f"{steps}m",
                        "exp_samples": [{"labels": selector("", labels),
                                         "value": round(1000 * value)}]})

    h = "modelserver_request_duration_seconds"
    expect(rec.REQUESTS_RATE, {**mk, "outcome": "success"}, 15, '{outcome="success"}')
    expect(rec.REQUESTS_RATE, {**mk, "outcome": "error"}, 5, '{outcome="error"}')
    expect(rec.ERROR_RATIO, mk, 0.25)
    expect(rec.latency(h, "mean"), mk, 0.5)
    expect(rec.latency(h, "p50"), mk, 0.5)
    expect(rec.TOKENS_RATE, {**mk, "token_type": "output"}, 100)
    expect(rec.PREFIX_CACHE_HIT_RATIO, mk, 0.25)
    expect(rec.REQUESTS_ACTIVE, {**mk, "state": "running"}, 6)
    expect(rec.KV_CACHE_USAGE, mk, 0.5)
    expect(rec.GPU_MEMORY_USAGE, {"gpu_uuid": "GPU-1", "backend": "dcgm"}, 0.5)
    team = {"team": "search", "resource": "gpus"}
    expect(rec.QUOTA_USAGE, team, 0.75)
    expect(rec.QUOTA_LIMIT, team, 1)
    cap = {"team": "search", "model": "model-a", "resource": "instances"}
    expect(rec.QUOTA_MODEL_USAGE, cap, 4)
    expect(rec.QUOTA_MODEL_LIMIT, cap, 3)
    expect(rec.SLO_CONCURRENCY, mk, 3)
    expect(rec.AUTOSCALING_SIGNAL, mk, 1.5)
    rollout = {"model": "model-a", "baseline": "1", "candidate": "2"}
    expect(rec.ROLLOUT_VERDICT, {**rollout, "verdict": "worse"}, 1, '{verdict="worse"}')
    expect(rec.ROLLOUT_VERDICT, {**rollout, "verdict": "same"}, 1, '{verdict="same"}')


def _check_burn_rates(suite: Suite, g: TestGroup, steps: int) -> None:
    """The first SLO's burn rates and budget remaining: 2 % bad in band "1" (rounded to
    1/1000 by the expression; windows and periods under two samples are skipped)."""
    slos = suite.slos
    slo = slos.slos[0]
    base = {"slo": slo.name, **_MODEL}
    for band, bad in (("1", 2000), ("all", 2000)):  # 2 % bad
        g.add(EVENTS, {**base, "band": band}, linear(EVENTS_PER_STEP, steps))
        g.add(GOOD, {**base, "band": band}, linear(EVENTS_PER_STEP - bad, steps))
    burn = Decimal("0.02") / error_budget(slo.objective)

    def close_to(expr: str, labels: dict[str, str], value: Decimal) -> None:
        # to 1/1000: absolutely, or relatively for values too large for that (a budget of
        # 1e-13 burns at 2e11, where doubles have no thousandths)
        if abs(value) < 10**9:
            check, expected = f"round(1000 * {expr})", round(1000 * value)
        else:
            check, expected = f"round(1000 * {expr} / {num(value)})", 1000
        g.exprs.append({"expr": check, "eval_time": f"{steps}m",
                        "exp_samples": [{"labels": selector("", labels),
                                         "value": int(expected)}]})

    # a range needs two samples: windows under two steps (a 1500ms period) are not checked
    for w in rec.burn_windows(slos):
        if w < 2 * STEP:
            suite.skip(f"recording rule {rec.burn_rate(w)} of SLO {slo.name}",
                       f"its window is under {2 * STEP}s, two samples of the tests' interval")
            continue
        for band in ("1", "all"):
            close_to(f"{rec.burn_rate(w)}{{slo={string(slo.name)}, band={string(band)}}}",
                     {**base, "band": band}, burn)
    if slo.period_seconds >= 2 * STEP:
        close_to(f"{rec.ERROR_BUDGET_REMAINING}{{slo={string(slo.name)}}}", base, 1 - burn)
    else:
        suite.skip(f"recording rule {rec.ERROR_BUDGET_REMAINING} of SLO {slo.name}",
                   f"its period is under {2 * STEP}s, two samples of the tests' interval")
