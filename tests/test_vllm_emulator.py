"""Tests for the vLLM-format emulator (a test double; it is not vLLM).

(a) format parity with the real vLLM 0.33.0 exposition fixture, (b) behaviour of the simulated
engine, (c) the HTTP server and its content negotiation.
"""

from __future__ import annotations

import gzip
import inspect
import itertools
import os
import re
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.demo import vllm_emulator as ve
from fleetwatch.demo.vllm_emulator import EMULATED_FAMILIES, EmulatorConfig, VllmEmulator

FIXTURES = Path(__file__).parent / "fixtures" / "expositions" / "vllm"
REAL_TEXT = FIXTURES / "v0.33.0-statlogger-cpu-generated.prom"
REAL_OPENMETRICS = FIXTURES / "v0.33.0-statlogger-openmetrics-negotiated-colon-bug.txt"
LABELS = {"model_name": "emulated-llm", "engine": "0"}
# What Prometheus >= 2.42 sends by default (it negotiates OpenMetrics first).
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
CREATED_DISABLED = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "").lower() in (
    "1",
    "true",
    "yes",
)


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _vllm_families(fams: dict) -> dict:
    """vllm:* families without the ``<name>_created`` gauges prometheus_client adds."""
    out = {}
    for name, fam in fams.items():
        if not name.startswith("vllm:"):
            continue
        base = name.removesuffix("_created")
        if base != name and fams.get(base) is not None and fams[base].type != "gauge":
            continue
        out[name] = fam
    return out


def _label_names(fam) -> set[str]:
    return {k for s in fam.samples for k in s.labels if k != "le"}


def _buckets(fam) -> list[float]:
    les = [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket")]
    return [float(le) for le in dict.fromkeys(les)]


@pytest.fixture(scope="module")
def real() -> dict:
    return _families(REAL_TEXT.read_text())


@pytest.fixture(scope="module")
def loaded() -> VllmEmulator:
    emu = VllmEmulator(arrival_rate_rps=3.0, seed=7)
    emu.run(60.0, dt_s=0.5)
    return emu


@pytest.fixture(scope="module")
def emitted(loaded: VllmEmulator) -> dict:
    body, content_type = loaded.exposition()
    assert content_type.startswith("text/plain; version=0.0.4")
    return _families(body.decode())


# ----------------------------------------------------------------------------- (a) format
def test_every_emulated_family_exists_in_real_fixture_with_same_type(real: dict) -> None:
    for name, mtype in EMULATED_FAMILIES.items():
        assert name in real, f"{name} is not in the real vLLM 0.33.0 exposition"
        assert real[name].type == mtype, name


def test_emitted_family_set_and_types_match(real: dict, emitted: dict) -> None:
    ours = {n: f.type for n, f in _vllm_families(emitted).items()}
    assert ours == EMULATED_FAMILIES
    theirs = {n: f.type for n, f in _vllm_families(real).items() if n in EMULATED_FAMILIES}
    assert ours == theirs


@pytest.mark.skipif(CREATED_DISABLED, reason="PROMETHEUS_DISABLE_CREATED_SERIES is set")
def test_created_gauges_match(real: dict, emitted: dict) -> None:
    for name, mtype in EMULATED_FAMILIES.items():
        if mtype in ("counter", "histogram"):
            assert real[f"{name}_created"].type == "gauge"
            assert emitted[f"{name}_created"].type == "gauge", name


def test_label_names_match(real: dict, emitted: dict) -> None:
    for name in EMULATED_FAMILIES:
        assert _label_names(emitted[name]) == _label_names(real[name]), name


def test_label_values_of_enumerated_labels_match(real: dict, emitted: dict) -> None:
    for name in EMULATED_FAMILIES:
        for label in ("finished_reason", "source", "reason", "sleep_state"):
            ours = {s.labels[label] for s in emitted[name].samples if label in s.labels}
            theirs = {s.labels[label] for s in real[name].samples if label in s.labels}
            assert ours == theirs, (name, label)


def test_histogram_buckets_identical(real: dict, emitted: dict) -> None:
    hists = [n for n, t in EMULATED_FAMILIES.items() if t == "histogram"]
    assert len(hists) == 16
    for name in hists:
        assert _buckets(emitted[name]) == _buckets(real[name]), name


def test_help_strings_match(real: dict, emitted: dict) -> None:
    for name in EMULATED_FAMILIES:
        assert emitted[name].documentation == real[name].documentation, name


def test_openmetrics_help_and_type_lines_match_real_colon_bug_fixture(
    loaded: VllmEmulator,
) -> None:
    body, content_type = loaded.exposition(PROMETHEUS_ACCEPT)
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    meta = re.compile(r"^# (?:HELP|TYPE) (vllm:\S+) .*$", re.M)
    ours = {m.group(0) for m in meta.finditer(body.decode())}
    theirs = {
        m.group(0)
        for m in meta.finditer(REAL_OPENMETRICS.read_text())
        if m.group(1) in EMULATED_FAMILIES
    }
    assert ours == theirs


def test_public_docstrings_carry_the_disclaimer() -> None:
    assert ve.DISCLAIMER in (ve.__doc__ or "")
    for name in ve.__all__:
        obj = getattr(ve, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        assert ve.DISCLAIMER in (obj.__doc__ or ""), name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                doc = getattr(member, "__doc__", None) or getattr(
                    getattr(member, "fget", None), "__doc__", None
                )
                if attr == "__init__" and doc is None:
                    continue  # dataclass-generated __init__ has no docstring
                if callable(member) or isinstance(member, property):
                    assert doc and ve.DISCLAIMER in doc, f"{name}.{attr}"


# ----------------------------------------------------------------------------- (b) behaviour
def _value(emu: VllmEmulator, sample: str, **extra: str) -> float:
    val = emu.registry.get_sample_value(sample, {**LABELS, **extra})
    assert val is not None, sample
    return val


def _monotonic_samples(emu: VllmEmulator) -> dict[tuple, float]:
    out: dict[tuple, float] = {}
    for fam in emu.registry.collect():
        if not fam.name.startswith("vllm:") or fam.type not in ("counter", "histogram"):
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _success_total(emu: VllmEmulator) -> float:
    return sum(
        _value(emu, "vllm:request_success_total", finished_reason=r) for r in ve.FINISHED_REASONS
    )


@pytest.fixture(scope="module")
def overloaded() -> tuple[VllmEmulator, list[tuple[float, float, dict]]]:
    """Overloaded engine: preemptions, queueing, timeouts; samples taken after every step."""
    emu = VllmEmulator(
        EmulatorConfig(
            arrival_rate_rps=10.0,
            max_num_seqs=32,
            kv_cache_capacity_tokens=8192,
            client_timeout_s=20.0,
            abort_fraction=0.1,
            seed=3,
        ),
        include_process_metrics=False,
    )
    trace = []
    for _ in range(120):
        emu.step(0.5)
        trace.append(
            (
                _value(emu, "vllm:num_requests_running"),
                _value(emu, "vllm:kv_cache_usage_perc"),
                _monotonic_samples(emu),
            )
        )
    return emu, trace


def test_counters_and_histograms_are_monotonic(overloaded) -> None:
    _emu, trace = overloaded
    for (_, _, before), (_, _, after) in itertools.pairwise(trace):
        for key, value in before.items():
            assert after[key] >= value, key


def test_running_bounded_and_kv_usage_is_a_ratio(overloaded) -> None:
    emu, trace = overloaded
    assert emu.stats.preemptions > 0, "overload config must exercise preemption"
    assert _value(emu, "vllm:num_preemptions_total") == emu.stats.preemptions
    assert emu.stats.max_running_seen <= 32
    assert max(r for r, _, _ in trace) <= 32
    assert all(0.0 <= kv <= 1.0 for _, kv, _ in trace)
    assert max(kv for _, kv, _ in trace) > 0.8


@pytest.mark.parametrize("which", ["loaded", "overloaded"])
def test_request_accounting_invariants(which: str, request: pytest.FixtureRequest) -> None:
    emu = request.getfixturevalue(which)
    if isinstance(emu, tuple):
        emu = emu[0]
    stats = emu.stats
    success = _success_total(emu)
    assert success == sum(stats.finished.values()) > 0
    # every finished request (aborts included) gets exactly one e2e observation
    assert success == _value(emu, "vllm:e2e_request_latency_seconds_count")
    assert success == _value(emu, "vllm:request_prompt_tokens_count")
    # TTFT: one observation per request that produced a first token
    ttft_count = _value(emu, "vllm:time_to_first_token_seconds_count")
    assert ttft_count == stats.first_tokens
    # ITL: one observation per token gap = generated tokens minus first tokens
    gen = _value(emu, "vllm:generation_tokens_total")
    assert gen == stats.generation_tokens
    assert _value(emu, "vllm:inter_token_latency_seconds_count") == gen - ttft_count
    assert _value(emu, "vllm:prompt_tokens_total") == stats.prompt_tokens
    # phase histograms only for requests that got that far
    queue = _value(emu, "vllm:request_queue_time_seconds_count")
    prefill = _value(emu, "vllm:request_prefill_time_seconds_count")
    assert prefill <= queue <= success
    assert prefill == _value(emu, "vllm:request_decode_time_seconds_count")
    assert prefill == _value(emu, "vllm:request_inference_time_seconds_count")
    assert _value(emu, "vllm:request_time_per_output_token_seconds_count") <= prefill
    # prefix cache: hits <= queries; device tier == local hits; iteration histogram counts steps
    hits = _value(emu, "vllm:prefix_cache_hits_total")
    assert 0 < hits <= _value(emu, "vllm:prefix_cache_queries_total")
    assert hits == _value(emu, "vllm:prompt_tokens_cached_by_source_total", source="device")
    assert _value(emu, "vllm:iteration_tokens_total_count") == stats.engine_steps
    assert _value(emu, "vllm:iteration_tokens_total_sum") == stats.prompt_tokens + gen


def test_aborts_are_counted_as_request_success(overloaded) -> None:
    emu, _ = overloaded
    aborts = _value(emu, "vllm:request_success_total", finished_reason="abort")
    assert aborts == emu.stats.finished["abort"] > 0
    # timeouts of never-scheduled requests: e2e but no queue observation
    assert _value(emu, "vllm:request_queue_time_seconds_count") < _success_total(emu)


def _steady_mean_itl(rate: float) -> float:
    emu = VllmEmulator(arrival_rate_rps=rate, seed=11, include_process_metrics=False)
    emu.run(20.0, dt_s=1.0)  # warm-up
    s0 = _value(emu, "vllm:inter_token_latency_seconds_sum")
    c0 = _value(emu, "vllm:inter_token_latency_seconds_count")
    emu.run(60.0, dt_s=1.0)
    s1 = _value(emu, "vllm:inter_token_latency_seconds_sum")
    c1 = _value(emu, "vllm:inter_token_latency_seconds_count")
    return (s1 - s0) / (c1 - c0)


def test_latency_grows_with_arrival_rate() -> None:
    low, high = _steady_mean_itl(0.5), _steady_mean_itl(5.0)
    assert high > 1.3 * low, (low, high)


def test_set_arrival_rate_changes_load() -> None:
    emu = VllmEmulator(arrival_rate_rps=0.0, include_process_metrics=False)
    emu.run(10.0, dt_s=1.0)
    assert emu.stats.arrived == 0
    emu.set_arrival_rate(4.0)
    emu.run(10.0, dt_s=1.0)
    assert 20 <= emu.stats.arrived <= 60


def test_deterministic_for_a_seed() -> None:
    def run() -> tuple:
        emu = VllmEmulator(arrival_rate_rps=4.0, seed=5, include_process_metrics=False)
        emu.run(30.0, dt_s=0.25)
        return emu.stats, _monotonic_samples(emu)

    assert run() == run()


def test_admission_rejections() -> None:
    emu = VllmEmulator(arrival_rate_rps=30.0, max_num_queued_reqs=5, include_process_metrics=False)
    emu.run(20.0, dt_s=0.5)
    assert emu.num_waiting <= 5
    rejected = emu.registry.get_sample_value(
        "vllm:admission_rejections_total",
        {"model_name": "emulated-llm", "reason": "max_num_queued_reqs"},
    )
    assert rejected == emu.stats.rejected > 0


def test_invalid_config_rejected() -> None:
    with pytest.raises(ValueError):
        EmulatorConfig(kv_cache_capacity_tokens=100, max_model_len=4096)
    with pytest.raises(TypeError):
        VllmEmulator(no_such_field=1)


# ----------------------------------------------------------------------------- (c) HTTP
def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status, dict(resp.headers), resp.read()


def test_http_server_negotiates_formats() -> None:
    emu = VllmEmulator(arrival_rate_rps=5.0, include_process_metrics=False)
    with ve.run_in_thread(emulator=emu, tick_s=0.02, time_scale=20.0) as handle:
        assert handle.url.startswith("http://127.0.0.1:") and handle.port > 0
        status, _, body = _get(handle.health_url)
        assert status == 200 and body == b""

        deadline = time.monotonic() + 3.0
        while emu.stats.first_tokens == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert emu.now > 0 and emu.stats.first_tokens > 0, "background ticker must advance"

        status, headers, body = _get(handle.metrics_url)
        assert status == 200
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = body.decode()
        assert re.search(r"^vllm:prompt_tokens_total\{", text, re.M)
        fams = _families(text)
        assert fams["vllm:generation_tokens"].samples[0].value > 0

        status, headers, body = _get(handle.metrics_url, {"Accept": PROMETHEUS_ACCEPT})
        assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
        text = body.decode()
        assert text.endswith("# EOF\n")
        assert "# TYPE vllm:prompt_tokens counter" in text
        samples = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        assert any(ln.startswith("vllm_prompt_tokens_total{") for ln in samples)
        assert not any(ln.startswith("vllm:") for ln in samples)  # the colon bug

        _, headers, body = _get(
            handle.metrics_url + "?name[]=vllm:num_requests_running",
            {"Accept-Encoding": "gzip"},
        )
        assert headers["Content-Encoding"] == "gzip"
        only = _families(gzip.decompress(body).decode())
        assert set(only) == {"vllm:num_requests_running"}
    assert not handle.running
