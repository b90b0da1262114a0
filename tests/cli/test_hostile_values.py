"""Hostile upstream values: non-finite and impossible values never poison anything.

Driven through ``fleetwatch normalize`` and a real ``fleetwatch serve`` (``/metrics``,
``/slo``), so the package's layout does not matter. Each broken series is refused,
counted by reason and withdrawn; valid series of the same exposition are served; the SLO
engine's counts stay finite and its JSON strict once valid data resumes.
"""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.helpers import wait_until
from tests.support.hostile import Sidecar, Upstream, cli, promtool_errors, strict_json

TTFT = "vllm:time_to_first_token_seconds"
OK_TTFT = "".join(f'{TTFT}_bucket{{model_name="ok",le="{le}"}} {v}\n'
                  for le, v in (("0.1", 1), ("1.0", 2), ("+Inf", 3))) + \
    f'{TTFT}_sum{{model_name="ok"}} 0.5\n{TTFT}_count{{model_name="ok"}} 3\n'
OK_VLLM = ('# TYPE vllm:request_success_total counter\n'
           'vllm:request_success_total{model_name="ok",finished_reason="stop"} 7\n'
           f'# TYPE {TTFT} histogram\n' + OK_TTFT)


def _vllm(broken: str) -> str:
    return OK_VLLM + broken


def _bad_hist(model: str, buckets: list[tuple[str, str]], count: str = "3") -> str:
    return "".join(f'{TTFT}_bucket{{model_name="{model}",le="{le}"}} {v}\n'
                   for le, v in buckets) + \
        f'{TTFT}_sum{{model_name="{model}"}} 0.5\n{TTFT}_count{{model_name="{model}"}} {count}\n'


#: (id, exposition, the reason it is refused, text that must not be in the output)
CASES = [
    ("counter NaN", _vllm('vllm:request_success_total{model_name="bad",finished_reason="stop"} '
                          'NaN\n'), "non_finite", 'model="bad"'),
    ("counter +Inf", _vllm('vllm:request_success_total{model_name="bad",finished_reason="stop"} '
                           '+Inf\n'), "non_finite", 'model="bad"'),
    ("counter negative", _vllm('vllm:request_success_total{model_name="bad",'
                               'finished_reason="stop"} -3\n'), "negative", 'model="bad"'),
    ("histogram _count NaN", _vllm(_bad_hist("bad", [("0.1", "1"), ("+Inf", "3")], "NaN")),
     "non_finite", 'model="bad"'),
    ("bucket +Inf value", _vllm(_bad_hist("bad", [("0.1", "+Inf"), ("+Inf", "+Inf")])),
     "non_finite", 'model="bad"'),
    ("buckets decrease", _vllm(_bad_hist("bad", [("0.1", "5"), ("1.0", "2"), ("+Inf", "5")])),
     "buckets_decrease", 'model="bad"'),
    ("no +Inf bucket", _vllm(_bad_hist("bad", [("0.1", "1"), ("1.0", "2")])),
     "no_inf_bucket", 'model="bad"'),
    ('le="NaN"', _vllm(_bad_hist("bad", [("NaN", "1"), ("+Inf", "3")])), "bad_le",
     'le="NaN"'),
    ("quantile 1.5", '# TYPE nv_inference_request_summary_us summary\n'
     'nv_inference_request_summary_us{model="m",version="1",quantile="1.5"} 3\n'
     'nv_inference_request_summary_us_count{model="m",version="1"} 1\n'
     'nv_inference_request_summary_us_sum{model="m",version="1"} 3\n', "bad_quantile",
     'quantile="1.5"'),
    ("negative summary value", '# TYPE nv_inference_request_summary_us summary\n'
     'nv_inference_request_summary_us{model="m",version="1",quantile="0.5"} -30\n'
     'nv_inference_request_summary_us_count{model="m",version="1"} 1\n'
     'nv_inference_request_summary_us_sum{model="m",version="1"} 3\n', "negative",
     "modelserver_request_duration_summary_seconds"),
    ("negative summary _sum", '# TYPE nv_inference_request_summary_us summary\n'
     'nv_inference_request_summary_us{model="m",version="1",quantile="0.5"} 3\n'
     'nv_inference_request_summary_us_count{model="m",version="1"} 1\n'
     'nv_inference_request_summary_us_sum{model="m",version="1"} -3\n', "negative",
     "modelserver_request_duration_summary_seconds"),
]


@pytest.mark.parametrize("text,reason,absent", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_normalize_refuses_the_series_and_says_why(tmp_path, text, reason, absent):
    source = "vllm" if text.startswith("#") and "vllm:" in text else "triton"
    f = tmp_path / "body.prom"
    f.write_text(text)
    res = cli("normalize", "--source", source, str(f))
    assert res.returncode == 0, res.stderr
    served = [line for line in res.stdout.splitlines()
              if not line.startswith(("#", "modelserver_model_info"))]
    assert not [line for line in served if absent in line], res.stdout
    assert f"refused 1 sample(s): {reason}" in res.stderr or \
        f": {reason}, e.g." in res.stderr, res.stderr
    # what is served parses strictly and passes promtool
    list(text_string_to_metric_families(res.stdout))
    assert promtool_errors(res.stdout) == []
    if source == "vllm":  # the valid model of the same exposition is served
        assert 'modelserver_requests_total{model="ok"' in res.stdout


def test_series_without_model_and_leaked_le_quantile_labels(tmp_path):
    f = tmp_path / "body.prom"
    f.write_text('# TYPE nv_inference_count counter\n'
                 'nv_inference_count 5\n'  # a per-model family without a model
                 'nv_inference_count{model="m",version="1",le="0.5",quantile="0.9"} 7\n')
    res = cli("normalize", "--source", "triton", str(f))
    samples = [line for line in res.stdout.splitlines() if line.startswith("modelserver_batch")]
    assert samples == ['modelserver_batch_items_total{model="m",model_version="1",'
                       'backend="triton",runtime="unknown"} 7'], res.stdout
    assert "no_model_label" in res.stderr


def _triton_body(success: str, failure: str, duration: str) -> str:
    return ("# TYPE nv_inference_request_success counter\n"
            f'nv_inference_request_success{{model="m",version="1"}} {success}\n'
            "# TYPE nv_inference_request_failure counter\n"
            f'nv_inference_request_failure{{model="m",version="1",reason="BACKEND"}} {failure}\n'
            "# TYPE nv_inference_request_duration_us counter\n"
            f'nv_inference_request_duration_us{{model="m",version="1"}} {duration}\n')


SLOS = {
    "windows": [{"long": "2s", "short": "1s", "budget_consumed": 0.05}],
    "capacity": {"window": "2s"},
    "slos": [{"name": "avail", "sli": {"availability": {}},
              "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
              "concurrency": {"envelope": 8}}],
}
#: Scrapes answered with each poisoned body in turn: three, so that a scrape the sidecar
#: gave up on (its timeout, on a starved machine) cannot hide a poison from it.
POISON_SCRAPES = 3
NEGATIVE_FAILURES = range(4, 4 + POISON_SCRAPES)
NAN_SUCCESSES = range(9, 9 + POISON_SCRAPES)
INF_SUCCESSES = range(NAN_SUCCESSES.stop, NAN_SUCCESSES.stop + POISON_SCRAPES)


def _poisoned(n: int) -> str:
    """Scrape n: 1,000 successes per scrape; a failure counter 0, then −300 (scrapes
    `NEGATIVE_FAILURES`), then 2; NaN, then +Inf success counters (`NAN_SUCCESSES`,
    `INF_SUCCESSES`); then valid again."""
    success = 1000.0 * (n + 1)
    failure = ("-300" if n in NEGATIVE_FAILURES
               else "2" if n >= NEGATIVE_FAILURES.stop else "0")
    s = ("NaN" if n in NAN_SUCCESSES else "+Inf" if n in INF_SUCCESSES else repr(success))
    return _triton_body(s, failure, repr(success * 100))


def test_nan_inf_and_negative_counters_never_poison_the_slo_engine():
    with Upstream(_poisoned) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.5},
             "targets": [{"name": "t", "kind": "triton", "url": up.url}]}, slos=SLOS) as sc:
        up.wait_requests(INF_SUCCESSES.stop, timeout=60)
        # every poisoned value was read and refused (each was served three times)
        wait_until(lambda: (sc.metric("fleetwatch_upstream_invalid_samples_total",
                                      target="t", reason="non_finite") or 0) >= 2
                   and (sc.metric("fleetwatch_upstream_invalid_samples_total", target="t",
                                  reason="negative") or 0) >= 1,
                   "the NaN, +Inf and negative counters refused")
        time.sleep(4.5)  # valid data for more than two full long windows
        status, text, _ = sc.get("/slo")
        assert status == 200
        doc = strict_json(text)  # never a bare NaN
        (st,) = [s for s in doc["slos"] if s["slo"] == "avail"]
        assert st["events"]["all"] > 0
        assert all(v == v for v in st["events"].values())
        # 2 real failures among thousands of requests: no regression, never a page
        assert st["state"] == "ok", st
        for bands in st["burn_rates"].values():
            for v in bands.values():
                assert v is None or v == v
        status, text, _ = sc.get("/autoscaling")
        strict_json(text)
        assert "refused" in sc.log() and "non_finite" in sc.log()


def test_buckets_in_any_order_are_checked_whole(tmp_path):
    # valid, but written +Inf first and interleaved with another histogram: kept
    ok = [("+Inf", "3"), ("1.0", "2"), ("0.1", "1")]
    lines = [f'{TTFT}_bucket{{model_name="{m}",le="{le}"}} {v}\n'
             for le, v in ok for m in ("a", "b")]
    # out of order and decreasing (0.1 → 5 > 1.0 → 2): refused
    lines += [f'{TTFT}_bucket{{model_name="c",le="{le}"}} {v}\n'
              for le, v in (("+Inf", "5"), ("0.1", "5"), ("1.0", "2"))]
    f = tmp_path / "order.prom"
    f.write_text(f"# TYPE {TTFT} histogram\n" + "".join(lines))
    res = cli("normalize", "--source", "vllm", str(f))
    assert res.returncode == 0, res.stderr
    for m in ("a", "b"):
        assert res.stdout.count(f'model="{m}"') == 3 + 1  # 3 buckets + model_info
    assert not [line for line in res.stdout.splitlines()
                if 'model="c"' in line and not line.startswith("modelserver_model_info")]
    assert "buckets_decrease" in res.stderr
