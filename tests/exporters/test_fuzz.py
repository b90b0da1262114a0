"""Fuzzing the parser, the mapping engine and the SLO engine with hypothesis.

Properties, on generated expositions mixing real upstream family names, hostile label
values and hostile values (NaN, ±Inf, negatives, non-numbers, non-ASCII digits):

* the parser and the normalizer never raise;
* what the normalizer renders parses with prometheus_client and fleetwatch's own parser
  without a skipped line, holds no series twice, and (a sample of it) passes
  ``promtool check metrics``;
* no cumulative normalized sample (counter, ``_bucket``, ``_count``, ``_sum``) is
  non-finite or negative, and every histogram's buckets rise with ``le`` up to ``+Inf``;
* in the SLO engine's view, fed a random sequence of scrapes, event counters never
  decrease, are never negative nor non-finite, and its status is strict JSON.

In-process (public functions of the package); the example counts keep it to seconds.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.exporters.render import render
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.labels.schema import METRICS_BY_NAME
from fleetwatch.sidecar.strictjson import dumps
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.support import unit_mode
from tests.support.hostile import promtool_errors

FAMILIES = ["nv_inference_request_success", "nv_inference_request_failure",
            "nv_inference_count", "nv_inference_request_duration_us",
            "nv_inference_request_summary_us", "nv_inference_pending_request_count",
            "vllm:request_success_total", "vllm:time_to_first_token_seconds",
            "vllm:num_requests_running", "vllm:gpu_cache_usage_perc",
            "DCGM_FI_DEV_FB_USED", "unmapped_family", "x"]
SUFFIXES = ["", "_total", "_bucket", "_sum", "_count", "_created"]
LABEL_NAMES = ["model", "version", "model_name", "le", "quantile", "reason",
               "finished_reason", "gpu", "UUID", "other"]
LABEL_VALUES = st.one_of(
    st.sampled_from(["m", "llm", "1", "0.5", "+Inf", "NaN", "-1", "1.5", "", "BACKEND",
                     "stop", "a b", "é", "\\\\", '\\"']),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                   blacklist_characters='\n"\\'), max_size=8))
VALUES = st.one_of(
    st.sampled_from(["0", "1", "-3", "NaN", "+Inf", "-Inf", "1e308", "1e400", "0x10", "1_0",
                     "line", "\u0661", "", "3 1700000000000", "2.5"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr))
HELPS = ["ok", "bad \\q escape", "fine \\n newline", "trailing \\"]
TYPES = ["counter", "gauge", "histogram", "summary", "untyped", "bogus"]


@st.composite
def expositions(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 25))):
        fam = draw(st.sampled_from(FAMILIES))
        if draw(st.booleans()) and draw(st.booleans()):
            lines.append(f"# TYPE {fam} {draw(st.sampled_from(TYPES))}")
        if draw(st.integers(0, 9)) == 0:
            helptext = draw(st.sampled_from(HELPS))
            lines.append(f"# HELP {fam} {helptext}")
        name = fam + draw(st.sampled_from(SUFFIXES))
        labels = draw(st.dictionaries(st.sampled_from(LABEL_NAMES), LABEL_VALUES, max_size=4))
        block = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{name}{{{block}}} {draw(VALUES)}" if labels or draw(st.booleans())
                     else f"{name} {draw(VALUES)}")
    if draw(st.integers(0, 9)) == 0:
        lines.append(draw(st.text(max_size=40)).replace("\n", " "))
    return "\n".join(lines) + "\n"


CUMULATIVE_SUFFIXES = ("_bucket", "_count", "_sum")
_checked_by_promtool: list[str] = []


def _cumulative(name: str) -> bool:
    if name in METRICS_BY_NAME:
        return METRICS_BY_NAME[name].type == "counter"
    for s in CUMULATIVE_SUFFIXES:
        base = name[: -len(s)]
        if name.endswith(s) and base in METRICS_BY_NAME and \
                METRICS_BY_NAME[base].type in ("histogram", "summary"):
            return True
    return False


def _check_rendered(text: str) -> None:
    samples, meta = parse_exposition(text)
    assert not meta.invalid, meta.invalid[:3]
    families = list(text_string_to_metric_families(text))
    assert families is not None
    seen = Counter((n, tuple(sorted(lab))) for n, lab, _ in samples)
    assert not [k for k, c in seen.items() if c > 1]
    buckets: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for name, labels, v in samples:
        if _cumulative(name):
            assert math.isfinite(v) and v >= 0, (name, labels, v)
        if name.startswith("modelserver_") and name.endswith("_bucket"):
            d = dict(labels)
            le = float(d.pop("le"))
            buckets[(name, tuple(sorted(d.items())))].append((le, v))
    for key, bs in buckets.items():
        bs.sort()
        assert bs[-1][0] == math.inf, key
        assert all(a[1] <= b[1] for a, b in itertools.pairwise(bs)), (key, bs)


@settings(max_examples=unit_mode.examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_parser_never_raises(text):
    parse_exposition(text)


@settings(max_examples=unit_mode.examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expositions(), st.sampled_from(sorted(TABLES)), st.booleans())
def test_normalizer_output_is_always_valid(text, kind, passthrough):
    n = Normalizer(TABLES[kind], passthrough=passthrough)
    for _ in range(2):  # cold, then cached
        out = render([n.normalize(text)])
        _check_rendered(out)
    if out.strip() and len(_checked_by_promtool) < 8:
        _checked_by_promtool.append(out)
        assert promtool_errors(out) == [], out


SLOS = parse_slo_file({
    "windows": [{"long": "60s", "short": "10s", "budget_consumed": 0.05}],
    "capacity": {"window": "60s"},
    "slos": [{"name": "avail", "sli": {"availability": {}},
              "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
              "concurrency": {"envelope": 8}},
             {"name": "ttft", "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.5}},
              "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
              "concurrency": {"envelope": 8}}]})
COUNTER_VALUES = st.one_of(st.sampled_from(["NaN", "+Inf", "-Inf", "-3", "0", "1e300"]),
                           st.integers(0, 10_000).map(str))


@st.composite
def vllm_scrape(draw: st.DrawFn) -> str:
    v = [draw(COUNTER_VALUES) for _ in range(6)]
    return ("# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{model_name="m",finished_reason="stop"}} {v[0]}\n'
            f'vllm:request_success_total{{model_name="m",finished_reason="abort"}} {v[1]}\n'
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="m"}} {draw(COUNTER_VALUES)}\n'
            "# TYPE vllm:time_to_first_token_seconds histogram\n"
            f'vllm:time_to_first_token_seconds_bucket{{model_name="m",le="0.5"}} {v[2]}\n'
            f'vllm:time_to_first_token_seconds_bucket{{model_name="m",le="+Inf"}} {v[3]}\n'
            f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} {v[4]}\n'
            f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {v[5]}\n')


@settings(max_examples=unit_mode.examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(vllm_scrape(), min_size=2, max_size=12))
def test_slo_engine_counts_never_decrease_nor_go_non_finite(scrapes):
    n = Normalizer(TABLES["vllm"])
    engine = SLOEngine(SLOS)
    before: dict[tuple, float] = {}
    for i, text in enumerate(scrapes):
        engine.update(Snapshot(1_000.0 + 5 * i, {"t": n.normalize(text)}))
        for key, st_ in engine.states.items():
            for band, ev in st_.events.items():
                good = st_.good[band]
                assert math.isfinite(ev) and ev >= 0 and 0 <= good <= ev, (key, band, ev)
                assert ev >= before.get((key, band), 0.0)
                before[(key, band)] = ev
        json.loads(dumps(engine.status()))
        json.loads(dumps(engine.autoscaling()))
        for _name, _labels, value in engine.iter_metrics():
            assert value == value or _name == "fleetwatch_slo_burn_rate"
