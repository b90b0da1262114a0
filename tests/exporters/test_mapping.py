"""Behaviour of the mappings: conversions, aliases, aggregation, hostile input (table-driven)."""

from __future__ import annotations

import math

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import TABLES, detect_kind
from fleetwatch.exporters.table import TargetContext
from tests.support.helpers import fixture_files


def normalized(text: str, kind: str | None = None, **ctx) -> dict[tuple, float]:
    """Normalize and return {(sample name, sorted labels): value}."""
    kind = kind or detect_kind(text)
    body = render([Normalizer(TABLES[kind], TargetContext(**ctx)).normalize(text)])
    samples, meta = parse_exposition(body)
    assert not meta.invalid, meta.invalid
    return {(n, tuple(sorted(labels))): v for n, labels, v in samples}


def pick(result: dict, name: str, **labels) -> float:
    """The one value of ``name`` whose labels include ``labels``."""
    hits = [v for (n, lab), v in result.items()
            if n == name and all((k, val) in lab for k, val in labels.items())]
    assert len(hits) == 1, f"{name}{labels}: {len(hits)} matches in {sorted(result)}"
    return hits[0]


TRITON = """# TYPE nv_inference_request_success counter
nv_inference_request_success{model="m",version="1",gpu_uuid="GPU-a"} 10
nv_inference_request_success{model="m",version="1",gpu_uuid="GPU-b"} 5
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="m",version="1",reason="BACKEND"} 3
nv_inference_request_failure{model="m",version="1",reason="REJECTED"} 1
nv_inference_request_failure{model="m",version="1",reason="CANCELED"} 0
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="m",version="1",gpu_uuid="GPU-a"} 2000000
nv_inference_request_duration_us{model="m",version="1",gpu_uuid="GPU-b"} 1000000
# TYPE nv_inference_queue_summary_us summary
nv_inference_queue_summary_us_count{model="m",version="1"} 15
nv_inference_queue_summary_us_sum{model="m",version="1"} 4500
nv_inference_queue_summary_us{model="m",version="1",quantile="0.99"} 900
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_bucket{model="s",version="1",le="100"} 8
nv_inference_first_response_histogram_ms_bucket{model="s",version="1",le="+Inf"} 9
nv_inference_first_response_histogram_ms_sum{model="s",version="1"} 1500
nv_inference_first_response_histogram_ms_count{model="s",version="1"} 9
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="m",version="1",namespace="prod"} 4
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-a"} 0.5
"""


def test_triton_conversions():
    r = normalized(TRITON, runtime_for=lambda m: "python")
    # success summed over gpu_uuid (which per-model series drop)
    assert pick(r, "modelserver_requests_total", outcome="success") == 15
    assert pick(r, "modelserver_requests_total", error_type="backend") == 3
    assert pick(r, "modelserver_requests_total", error_type="rejected") == 1
    assert pick(r, "modelserver_requests_total", error_type="cancelled") == 0
    # µs counters → seconds sum; count and +Inf bucket = successes: mean only
    assert pick(r, "modelserver_request_duration_seconds_sum", model="m") == 3.0
    assert pick(r, "modelserver_request_duration_seconds_count", model="m") == 15
    assert pick(r, "modelserver_request_duration_seconds_bucket", model="m", le="+Inf") == 15
    assert not [k for k in r if k[0] == "modelserver_request_duration_seconds_bucket"
                and ("le", "+Inf") not in k[1]], "no invented buckets"
    # summaries stay summaries: quantile and sum in seconds, count unscaled
    assert pick(r, "modelserver_queue_duration_summary_seconds", quantile="0.99") == 0.0009
    assert pick(r, "modelserver_queue_duration_summary_seconds_sum") == 0.0045
    assert pick(r, "modelserver_queue_duration_summary_seconds_count") == 15
    # ms histogram → seconds, bounds too
    assert pick(r, "modelserver_time_to_first_token_seconds_bucket", le="0.1") == 8
    assert pick(r, "modelserver_time_to_first_token_seconds_sum") == 1.5
    # Triton namespace renamed; runtime from context
    assert pick(r, "modelserver_requests_active", model_namespace="prod", state="waiting",
                runtime="python") == 4
    assert pick(r, "modelserver_gpu_utilization_ratio", gpu_uuid="GPU-a",
                backend="triton") == 0.5


def test_triton_failure_without_reason_before_24_08():
    r = normalized("nv_inference_request_failure{model=\"m\",version=\"1\"} 2\n", "triton")
    assert pick(r, "modelserver_requests_total", outcome="error", error_type="other") == 2


VLLM_OLD_AND_NEW = """# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="l",engine="0"} 0.25
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="l",engine="0"} 0.5
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="l",engine="0"} 7
"""


@pytest.mark.parametrize("text", [VLLM_OLD_AND_NEW,
                                  "\n".join(reversed(VLLM_OLD_AND_NEW.splitlines())) + "\n"])
def test_vllm_new_name_wins_over_deprecated_alias_in_any_order(text):
    r = normalized(text, "vllm")
    assert pick(r, "modelserver_kv_cache_usage_ratio", model="l") == 0.5
    # only the old name present → used
    assert pick(r, "modelserver_prefix_cache_hits_total", cache_tier="local") == 7


def test_vllm_colon_bug_spelling_equals_text_format():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="l",engine="1"} 3\n'
        "# TYPE vllm:request_success counter\n"
        'vllm:request_success_total{model_name="l",engine="1",finished_reason="abort"} 2\n'
    )
    om = text.replace("\nvllm:", "\nvllm_")
    assert normalized(text, "vllm") == normalized(om, "vllm")
    r = normalized(om, "vllm")
    assert pick(r, "modelserver_requests_active", dp_rank="1", state="running") == 3
    assert pick(r, "modelserver_requests_total", outcome="error", error_type="cancelled",
                finish_reason="abort") == 2


def test_vllm_without_engine_label_gets_dp_rank_0():
    r = normalized('vllm:num_requests_waiting{model_name="l"} 1\n', "vllm")
    assert pick(r, "modelserver_requests_active", dp_rank="0", state="waiting") == 1


def test_vllm_v0_hit_rate_sentinel_is_nan_not_minus_one():
    r = normalized('vllm:gpu_prefix_cache_hit_rate{model_name="l"} -1.0\n', "vllm")
    assert math.isnan(pick(r, "modelserver_prefix_cache_hit_ratio"))


def test_dcgm_conversions():
    text = """DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",Hostname="h",modelName="L4",pod="p",namespace="ns"} 91
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x",Hostname="h",modelName="L4",pod="p",namespace="ns"} 1024
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-x",Hostname="h",modelName="L4",pod="p",namespace="ns"} 3072
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-x",Hostname="h",modelName="L4",pod="p",namespace="ns"} 512
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-x",Hostname="h",modelName="L4",pod="p",namespace="ns"} 123456
"""
    r = normalized(text, "dcgm")
    assert pick(r, "modelserver_gpu_utilization_ratio", gpu_uuid="GPU-x", hostname="h",
                pod_name="p", pod_namespace="ns", gpu_model="L4") == 0.91
    assert pick(r, "modelserver_gpu_memory_used_bytes") == 1024 * 2**20
    assert pick(r, "modelserver_gpu_memory_total_bytes") == (1024 + 3072 + 512) * 2**20
    assert pick(r, "modelserver_gpu_energy_joules_total") == 123.456
    lowercase = text.replace("Hostname", "hostname")
    assert normalized(lowercase, "dcgm") == r


def test_trtllm_category_labels_and_old_names():
    text = """nv_trt_llm_request_metrics{model="t",request_type="scheduled",version="1"} 4
nv_trt_llm_request_metrics{model="t",request_type="waiting",version="1"} 2
nv_trt_llm_request_statistics{model="t",request_type="scheduled",version="1"} 99
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="t",version="1"} 0.4
nv_llm_output_token_len_sum{model="t",response_metric_type="total_output_tokens",version="1"} 500
nv_llm_output_token_len_count{model="t",response_metric_type="total_output_tokens",version="1"} 5
"""
    r = normalized(text, "triton")
    assert pick(r, "modelserver_requests_active", state="running") == 4
    assert pick(r, "modelserver_requests_active", state="waiting") == 2
    assert pick(r, "modelserver_kv_cache_usage_ratio") == 0.4
    assert pick(r, "modelserver_tokens_total", token_type="output") == 500


def test_counter_reset_passes_through():
    n = Normalizer(TABLES["triton"])
    line = 'nv_inference_request_success{model="m",version="1"} %d\n'
    values = []
    for v in (100, 150, 3):  # model reloaded: counter restarted
        body = render([n.normalize(line % v)])
        samples, _ = parse_exposition(body)
        values.append(next(val for name, lab, val in samples
                           if name == "modelserver_requests_total"))
    assert values == [100, 150, 3]


def test_hostile_label_values_survive_and_stay_escaped():
    hostile = 'quote\\" back\\\\slash new\\nline ünïcødé } { #'
    text = f'nv_inference_request_success{{model="{hostile}",version="1"}} 7\n'
    r = normalized(text, "triton")
    assert pick(r, "modelserver_requests_total", model='quote" back\\slash new\nline ünïcødé } { #') == 7


@pytest.mark.parametrize("value,expected", [
    ("NaN", math.nan), ("+Inf", math.inf), ("-Inf", -math.inf),
    ("1.8446744073709552e+19", 1.8446744073709552e19), ("9223372036854775807", 2.0**63),
])
def test_special_and_huge_values(value, expected):
    r = normalized(f'vllm:num_requests_running{{model_name="l"}} {value}\n', "vllm")
    got = pick(r, "modelserver_requests_active")
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_duplicated_and_interleaved_families_do_not_double_count():
    text = """# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 5
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="m",version="1"} 2
nv_inference_count{model="m",version="1"} 6
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 6
"""
    r = normalized(text, "triton")
    assert pick(r, "modelserver_batch_items_total") == 6  # last sample of the series wins
    assert pick(r, "modelserver_batch_executions_total") == 2


def test_malformed_lines_are_counted_and_good_lines_kept():
    text = ('nv_inference_request_success{model="m",version="1"} 4\n'
            'nv_inference_request_success{model="m",version="1" 4\n'
            'nv_inference_count{model="m",version="1"} four\n'
            'nv_inference_exec_count{model="m",version="1"} 1_000\n')
    n = Normalizer(TABLES["triton"]).normalize(text)
    assert [b.lineno for b in n.meta.invalid] == [2, 3, 4]
    assert n.series_count > 0


def test_unmapped_families_are_counted_and_passed_through_on_request():
    text = "# TYPE custom_thing gauge\ncustom_thing{a=\"1\"} 3\nnv_inference_count{model=\"m\",version=\"1\"} 1\n"
    n = Normalizer(TABLES["triton"]).normalize(text)
    assert n.unmapped == {"custom_thing"}
    assert "custom_thing" not in render([n])
    p = Normalizer(TABLES["triton"], passthrough=True).normalize(text)
    assert '# TYPE custom_thing gauge\ncustom_thing{a="1"} 3' in render([p])


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_every_fixture_normalizes_to_valid_exposition(path):
    from prometheus_client.parser import text_string_to_metric_families

    text = path.read_text(encoding="utf-8")
    n = Normalizer(TABLES[detect_kind(text)]).normalize(text)
    body = render([n])
    fams = list(text_string_to_metric_families(body))  # the reference parser accepts it
    assert len({f.name for f in fams}) == len(fams), "each family appears once"
    for f in fams:
        assert f.name.startswith("modelserver_")


def test_backend_histogram_wins_over_triton_mean_only_form_for_the_same_model():
    text = """nv_inference_request_success{model="llm",version="1"} 10
nv_inference_request_duration_us{model="llm",version="1"} 9000000
nv_inference_queue_duration_us{model="llm",version="1"} 500000
vllm:e2e_request_latency_seconds_bucket{model="llm",version="1",le="1.0"} 4
vllm:e2e_request_latency_seconds_bucket{model="llm",version="1",le="+Inf"} 9
vllm:e2e_request_latency_seconds_sum{model="llm",version="1"} 8.5
vllm:e2e_request_latency_seconds_count{model="llm",version="1"} 9
nv_inference_request_success{model="cls",version="1"} 3
nv_inference_request_duration_us{model="cls",version="1"} 30000
"""
    r = normalized(text, "triton")
    # the LLM: the vLLM backend's histogram, whole and consistent (not summed with Triton's)
    assert pick(r, "modelserver_request_duration_seconds_count", model="llm") == 9
    assert pick(r, "modelserver_request_duration_seconds_sum", model="llm") == 8.5
    assert pick(r, "modelserver_request_duration_seconds_bucket", model="llm", le="+Inf") == 9
    assert pick(r, "modelserver_request_duration_seconds_bucket", model="llm", le="1.0") == 4
    # the classic model keeps Triton's mean-only form
    assert pick(r, "modelserver_request_duration_seconds_count", model="cls") == 3
    assert pick(r, "modelserver_request_duration_seconds_sum", model="cls") == 0.03
    # queue time still comes from Triton for both
    assert pick(r, "modelserver_queue_duration_seconds_count", model="llm") == 10


def test_mean_only_histogram_needs_its_duration_counter():
    """Triton without *_duration_us (counter_latencies=false, partial captures): the success
    count alone is no latency, so no request/queue/phase histogram is emitted."""
    r = normalized('nv_inference_request_success{model="m",version="1"} 5\n'
                   'nv_inference_queue_duration_us{model="m",version="1"} 2000000\n', "triton")
    assert pick(r, "modelserver_requests_total", outcome="success") == 5
    assert pick(r, "modelserver_queue_duration_seconds_count") == 5
    assert pick(r, "modelserver_queue_duration_seconds_sum") == 2.0
    assert not [k for k in r if k[0].startswith(("modelserver_request_duration_seconds",
                                                 "modelserver_phase_duration_seconds"))]


def test_upstream_labels_outside_the_schema_are_dropped_and_never_override():
    text = ('nv_inference_request_success{model="m",version="1",model_version="9",'
            'outcome="failure",WorkerId="w1"} 10\n'
            'nv_inference_request_success{model="m",version="1",model_version="9",'
            'outcome="failure",WorkerId="w2"} 5\n')
    r = normalized(text, "triton")
    ((_name, labels),) = [k for k in r if k[0] == "modelserver_requests_total"]
    assert dict(labels) == {"model": "m", "model_version": "1", "backend": "triton",
                            "runtime": "unknown", "outcome": "success"}
    assert r[("modelserver_requests_total", labels)] == 15  # summed over the dropped label


@pytest.mark.parametrize("lines,expected", [
    # the same series spelled twice: the last sample wins, never a sum
    (['nv_inference_count{model="m"} 10', 'nv_inference_count{model="m",} 11'], 11),
    (['vllm:time_to_first_token_seconds_bucket{model="l",version="1",le="Inf"} 1',
      'vllm:time_to_first_token_seconds_bucket{model="l",version="1",le="+Inf"} 2',
      'vllm:time_to_first_token_seconds_bucket{model="l",version="1",le="+inf"} 3'], 3),
])
def test_spellings_of_one_series_are_one_series(lines, expected):
    r = normalized("\n".join(lines) + "\n", "triton")
    assert list(r.values()) == [expected]


@pytest.mark.parametrize("le", ["0x10", "1_0", "ten", ""])
def test_invalid_bucket_bounds_are_reported(le):
    text = f'vllm:time_to_first_token_seconds_bucket{{model="l",version="1",le="{le}"}} 1\n'
    n = Normalizer(TABLES["triton"]).normalize(text)
    assert n.series_count == 0
    assert n.invalid_samples == {"bad_le": 1}
    assert n.invalid_examples["bad_le"].endswith(f"invalid le label {le!r}")


def test_bom_and_openmetrics_eof():
    text = ("\ufeffnv_inference_count{model=\"m\",version=\"1\"} 3\n# EOF\n"
            "nv_inference_exec_count{model=\"m\",version=\"1\"} 1\n")
    r = normalized(text, "triton")
    assert list(r) == [("modelserver_batch_items_total",
                        (("backend", "triton"), ("model", "m"), ("model_version", "1"),
                         ("runtime", "unknown")))]


def test_two_targets_with_the_same_series_never_render_duplicates():
    text = 'nv_inference_request_success{model="r",version="1"} %d\n'
    a = Normalizer(TABLES["triton"]).normalize(text % 1)
    b = Normalizer(TABLES["triton"]).normalize(text % 2)
    collisions: list[str] = []
    body = render([a, b], collisions=collisions)
    samples, _meta = parse_exposition(body)
    keys = [(n, lab) for n, lab, _ in samples]
    assert len(keys) == len(set(keys))
    assert collisions and all(c.startswith("modelserver_") for c in collisions)


def test_series_keys_come_from_the_compiler_and_match_the_rendered_prefix():
    """Normalized.key is what the normalizer compiled (no parsing), and it agrees with the
    rendered text for every series of every fixture (values unescaped)."""
    from fleetwatch.exporters.parser import split_key
    from tests.support.helpers import fixture_files

    for path in fixture_files():
        text = path.read_text(encoding="utf-8")
        n = Normalizer(TABLES[detect_kind(text)]).normalize(text)
        for fam in n.families:
            for prefix in fam:
                assert prefix in n.keys, (path.name, prefix)
                assert n.key(prefix) == split_key(prefix), (path.name, prefix)


@pytest.mark.parametrize("suffix", [" 1700000000000", " # {trace_id=\"a b\"} 1.0", "\r",
                                    "\t", " ", "\u00a0"])
def test_a_new_line_spelled_otherwise_maps_like_the_plain_line_or_is_refused(suffix):
    # the normalizer splits a new 'name{labels} value' line itself; any other spelling
    # (timestamp, exemplar, CR, a tab or a space after the value, non-ASCII space) is
    # split by the parser: the same series, or a line refused, never another series
    plain = 'nv_inference_count{model="m",version="1"} 7\n'
    odd = plain[:-1] + suffix + "\n"
    n_plain, n_odd = Normalizer(TABLES["triton"]), Normalizer(TABLES["triton"])
    want = render([n_plain.normalize(plain)])
    got = n_odd.normalize(odd)
    assert render([got]) == want or (got.meta.invalid and got.series_count == 0)


def test_a_cold_cycle_leaves_the_collector_on_with_nothing_frozen():
    # a cold cycle pauses the cyclic GC and hands what it compiled to the oldest
    # generation (gc.freeze + gc.unfreeze): afterwards the collector is on again and
    # nothing stays frozen (frozen objects would never be collected)
    import gc

    text = "".join(f'nv_inference_count{{model="m{i}",version="1"}} {i}\n'
                   f'nv_inference_exec_count{{model="m{i}",version="1"}} {i}\n'
                   for i in range(3000))  # 6000 new series: past Normalizer.PROMOTE_AT
    assert gc.isenabled()
    n = Normalizer(TABLES["triton"])
    assert n.normalize(text).series_count > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


@pytest.mark.parametrize("suffix", ["\t", " ", "\t \r", "\u00a0"])
def test_blanks_after_the_value_are_read_alike_on_every_scrape(suffix):
    # Prometheus' blanks (spaces, tabs; a CR) after the value are not part of it, on the
    # first scrape and on later ones (unchanged value: the kept line; changed: parsed
    # again); a non-ASCII space is an invalid value on every scrape (Prometheus refuses
    # it too), never a value served on one scrape and dropped on the next
    n_plain, n_odd = Normalizer(TABLES["triton"]), Normalizer(TABLES["triton"])
    for value in ("7", "7", "8", "8"):
        plain = f'nv_inference_count{{model="m",version="1"}} {value}\n'
        got = n_odd.normalize(plain[:-1] + suffix + "\n")
        want = render([n_plain.normalize(plain)])
        if suffix.isascii():
            assert render([got]) == want, (value, render([got]))
        else:
            assert got.series_count == 0 and got.meta.invalid, value


def test_one_label_block_read_by_a_summary_and_a_histogram_keeps_each_its_own_tail():
    # the block's own le/quantile is rendered once per block for the plans that keep
    # it: a summary keeps quantile, a histogram le; in either order, as each alone
    block = '{model="m",version="1",le="100",quantile="0.5"}'
    summary = f"nv_inference_queue_summary_us{block} 900\n"
    bucket = (f"nv_inference_first_response_histogram_ms_bucket{block} 8\n"
              "nv_inference_first_response_histogram_ms_bucket"
              '{model="m",version="1",le="+Inf",quantile="0.5"} 9\n')
    alone = {**normalized(summary, "triton"), **normalized(bucket, "triton")}
    assert len(alone) == 3
    assert normalized(summary + bucket, "triton") == alone
    assert normalized(bucket + summary, "triton") == alone


def test_a_runtime_learned_after_a_deferring_pass_labels_the_series_of_the_next():
    # a pass leaves out the models whose runtime is coming (Normalized.deferred); the
    # runtime learned meanwhile labels every series of the next pass, each model's read
    # once per pass
    text = ('nv_inference_count{model="a",version="1"} 1\n'
            'nv_inference_exec_count{model="a",version="1"} 1\n'
            'nv_inference_count{model="b",version="1"} 2\n'
            'nv_inference_queue_summary_us{model="b",version="1",quantile="0.5"} 3\n')
    runtimes = {"b": "python"}
    asked: list[str] = []

    def runtime_for(model: str) -> str:
        asked.append(model)
        return runtimes.get(model, "unknown")

    n = Normalizer(TABLES["triton"], TargetContext(runtime_for=runtime_for,
                                                   defer=lambda m: m not in runtimes))
    first = n.normalize(text)
    assert first.deferred == {"a"}
    assert {m[0] for m in first.models} == {"b"}
    runtimes["a"] = "onnxruntime"
    asked.clear()
    body = render([n.normalize(text)])
    assert asked == ["a"]  # b's series were compiled by the first pass
    samples, _meta = parse_exposition(body)
    got = {dict(labels)["model"]: dict(labels)["runtime"] for _n, labels, _v in samples}
    assert got == {"a": "onnxruntime", "b": "python"}
    assert len(samples) == 4


@pytest.mark.parametrize("order", [(0, 1, 2, 3, 4), (2, 3, 4, 1, 0), (2, 0, 3, 1, 4)])
def test_a_summarys_series_map_alike_in_any_order_and_as_each_alone(order):
    # the quantiles' base labels are shared with the _count/_sum block's mapping
    # (whichever comes first); the labels are each line's own, its value-map value too
    lines = ['nv_inference_queue_summary_us_count{model="m",version="1"} 15',
             'nv_inference_queue_summary_us_sum{model="m",version="1"} 4500',
             'nv_inference_queue_summary_us{model="m",version="1",quantile="0.5"} 300',
             'nv_inference_queue_summary_us{model="m",version="1",quantile="0.99"} 900',
             'nv_inference_request_failure{model="m",version="1",reason="BACKEND"} 3']
    alone: dict[tuple, float] = {}
    for line in lines:
        alone.update(normalized(line + "\n", "triton"))
    assert len(alone) == 5
    assert normalized("".join(lines[i] + "\n" for i in order), "triton") == alone


def test_states_handed_out_stay_as_they_were_when_families_are_reused():
    # a family whose lines are those of the last exposition reuses its dict and lines
    # (the last state's objects); a sum of several upstream series or a withdrawal
    # changing it afterwards must not change an earlier state
    base = ('nv_inference_request_failure{model="m",version="1",reason="BACKEND"} 3\n'
            'nv_inference_count{model="m",version="1"} 7\n'
            'nv_inference_request_duration_us{model="m",version="1"} 2000\n')
    success = 'nv_inference_request_success{{model="m",version="1",gpu_uuid="{}"}} {}\n'
    bodies = [base,
              base + success.format("a", 10) + success.format("b", 5),  # summed
              base,
              base + success.format("a", 11) + success.format("b", -5),  # withdrawn
              base.replace("nv_inference_request_duration_us", "nv_other_us")
              + success.format("a", 12)]  # a count without its sum: left out
    n = Normalizer(TABLES["triton"])
    states, rendered = [], []
    for body in bodies * 2:
        states.append(n.normalize(body))
        rendered.append(render([states[-1]]))
        # as a fresh normalizer reads the body (a sum's value may be spelled "12.0")
        fresh = render([Normalizer(TABLES["triton"]).normalize(body)])
        assert parse_exposition(rendered[-1])[0] == parse_exposition(fresh)[0]
        assert [render([s]) for s in states] == rendered  # earlier states unchanged
    assert len(set(rendered)) == 3  # the withdrawn sum renders as the base alone
