"""Every vLLM version maps to the same names: V0 0.4.x, early V1 0.8.x (no ``engine``),
0.10.x (deprecated names beside new ones, ``_created``), current 0.33. The fixtures come
from vLLM's own stat loggers (tools/gen_vllm_fixtures.py) fed the same simulated requests.
"""

from __future__ import annotations

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import TABLES, detect_kind
from tests.support.helpers import FIXTURES

VLLM = FIXTURES / "vllm"
GENERATED = {
    "0.4.3 (V0)": "v0.4.3-v0-statlogger-cpu-generated.prom",
    "0.8.2 (V1, no engine)": "v0.8.2-statlogger-cpu-generated.prom",
    "0.10.1.1 (V1)": "v0.10.1.1-statlogger-cpu-generated.prom",
    "0.10.1.1 (V0 logger)": "v0.10.1.1-v0-statlogger-cpu-generated.prom",
    "0.33.0 (V1)": "v0.33.0-statlogger-cpu-generated-gen_vllm_fixtures.prom",
}
#: What every vLLM version since 0.4 provides, under one name.
CORE = {
    "modelserver_requests_total", "modelserver_request_duration_seconds",
    "modelserver_time_to_first_token_seconds", "modelserver_inter_token_latency_seconds",
    "modelserver_tokens_total", "modelserver_request_tokens", "modelserver_requests_active",
    "modelserver_kv_cache_usage_ratio", "modelserver_preemptions_total",
}


def families_and_samples(path):
    text = path.read_text(encoding="utf-8")
    assert detect_kind(text) == "vllm"
    n = Normalizer(TABLES["vllm"]).normalize(text)
    assert not n.meta.invalid
    samples, meta = parse_exposition(render([n]))
    return set(meta.types), samples, n


@pytest.mark.parametrize("version", GENERATED)
def test_every_version_gives_the_core_schema(version):
    families, samples, n = families_and_samples(VLLM / GENERATED[version])
    assert families >= CORE, CORE - families
    labels = [dict(lab) for _, lab, _ in samples]
    assert all(lab["dp_rank"] == "0" for lab in labels)  # engine="0", or absent before 0.8.3
    assert all(lab["backend"] == "vllm" for lab in labels)
    # per-model series carry the runtime; the engine's KV capacity has no model (per engine)
    assert all(dict(lab)["runtime"] == "vllm" for name, lab, _ in samples
               if name != "modelserver_kv_cache_capacity_tokens")
    assert not any(name.endswith("_created") for name, _, _ in samples)
    assert not any(f.endswith("_created") for f in n.unmapped), "folded into their family"


def test_same_requests_same_numbers_across_engine_versions():
    """The generator fed every version the same 7 requests: the normalized request and
    token counts agree, whatever the version's names."""
    def totals(version):
        _, samples, _ = families_and_samples(VLLM / GENERATED[version])
        out = {}
        for name, labels, value in samples:
            lab = dict(labels)
            if name == "modelserver_requests_total":
                key = (name, lab["outcome"], lab.get("finish_reason", ""))
                out[key] = out.get(key, 0) + value
            if name == "modelserver_time_to_first_token_seconds_count":
                out[name] = value
        return out

    reference = totals("0.33.0 (V1)")
    assert reference[("modelserver_requests_total", "success", "stop")] == 2
    assert reference[("modelserver_requests_total", "error", "abort")] == 1
    for version in ("0.8.2 (V1, no engine)", "0.10.1.1 (V1)"):
        got = totals(version)
        for key in (("modelserver_requests_total", "success", "stop"),
                    ("modelserver_requests_total", "success", "length"),
                    ("modelserver_requests_total", "error", "abort"),
                    "modelserver_time_to_first_token_seconds_count"):
            assert got[key] == reference[key], (version, key)


def test_0_10_deprecated_names_do_not_duplicate_series():
    text = (VLLM / GENERATED["0.10.1.1 (V1)"]).read_text()
    assert "vllm:gpu_cache_usage_perc" in text and "vllm:kv_cache_usage_perc" in text
    assert "vllm:gpu_prefix_cache_hits_total" in text and "vllm:prefix_cache_hits_total" in text
    _, samples, _ = families_and_samples(VLLM / GENERATED["0.10.1.1 (V1)"])
    kv = [v for name, _, v in samples if name == "modelserver_kv_cache_usage_ratio"]
    hits = [v for name, lab, v in samples if name == "modelserver_prefix_cache_hits_total"
            and dict(lab)["cache_tier"] == "local"]
    assert len(kv) == 1 and len(hits) == 1


def test_v0_time_per_output_token_is_itl_and_v1_033_has_both():
    f033, _, _ = families_and_samples(VLLM / GENERATED["0.33.0 (V1)"])
    f043, _, _ = families_and_samples(VLLM / GENERATED["0.4.3 (V0)"])
    assert "modelserver_time_per_output_token_seconds" in f033  # per-request TPOT, 0.11+
    assert "modelserver_time_per_output_token_seconds" not in f043  # V0 has ITL only
    assert "modelserver_inter_token_latency_seconds" in f043


def test_real_capture_and_generated_0_4_3_agree_on_families():
    real, _, _ = families_and_samples(VLLM / "v0.4.3-v0-datadog-opt125m-one-request.prom")
    generated, _, _ = families_and_samples(VLLM / GENERATED["0.4.3 (V0)"])
    assert real == generated
