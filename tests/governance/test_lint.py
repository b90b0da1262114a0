"""The model-configuration lint: each check on configurations that trip it and that do not."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.alerts.config import parse_alerting_config
from fleetwatch.governance.lint import (
    CHECKS,
    ModelFacts,
    default_not_ready_allowance,
    exposition,
    lint,
    not_ready_allowance,
)
from fleetwatch.labels.registry import ModelEntry
from fleetwatch.labels.schema_labels import LABELS


def _entry(name, tier="standard", startup=None):
    dep = {"deployment": {"name": name, "startup_seconds": startup}} if startup else {}
    return ModelEntry.model_validate({"name": name, "team": "t", "owner": "o", "oncall": "c",
                                      "latency_tier": tier, **dep})


def _checks(models, allowance=None):
    return [(f.model, f.check, f.severity) for f in lint(models, allowance)]


@pytest.mark.parametrize("backend", ["vllm", "tensorrtllm"])
def test_dynamic_batching_on_an_llm_backend(backend):
    cfg = {"backend": backend, "dynamic_batching": {}}
    assert _checks([ModelFacts("llm", cfg, None)]) == \
        [("llm", "dynamic_batching_llm_backend", "error")]
    assert _checks([ModelFacts("llm", {"backend": backend}, None)]) == []
    assert _checks([ModelFacts("m", {"backend": "python", "dynamic_batching": {}},
                               None)]) == []


def test_latency_tier_without_a_queue_timeout():
    no_timeout = {"backend": "python", "dynamic_batching": {"max_queue_delay_microseconds": "500"}}
    timeout = {"backend": "python", "dynamic_batching": {"default_queue_policy": {
        "timeout_action": "REJECT", "default_timeout_microseconds": "20000"}}}
    assert _checks([ModelFacts("r", no_timeout, _entry("r", "interactive"))]) == \
        [("r", "latency_no_queue_timeout", "warning")]
    assert _checks([ModelFacts("r", {"backend": "python"}, _entry("r", "interactive"))]) == \
        [("r", "latency_no_queue_timeout", "warning")]
    assert _checks([ModelFacts("r", timeout, _entry("r", "interactive"))]) == []
    assert _checks([ModelFacts("r", no_timeout, _entry("r", "batch"))]) == []


def test_an_interactive_llm_backend_model_gets_one_consistent_fix():
    """Only 'remove dynamic_batching', never also 'add a queue policy to it': the engine
    queues in its own scheduler."""
    cfg = {"backend": "vllm", "dynamic_batching": {}}
    assert _checks([ModelFacts("llm", cfg, _entry("llm", "interactive"))]) == \
        [("llm", "dynamic_batching_llm_backend", "error")]
    assert _checks([ModelFacts("llm", {"backend": "vllm"}, _entry("llm", "interactive"))]) == []


def _gpu(*gpus):
    return {"backend": "python", "instance_group": [{"kind": "KIND_GPU", "count": 1,
                                                     "gpus": list(gpus)}],
            "dynamic_batching": {"default_queue_policy": {"default_timeout_microseconds": 1}}}


def test_latency_tier_on_a_gpu_shared_with_throughput_models():
    fast = ModelFacts("fast", _gpu(0), _entry("fast", "interactive"))
    assert _checks([fast, ModelFacts("bulk", _gpu(0, 1), _entry("bulk", "batch"))]) == \
        [("fast", "latency_gpu_shared", "error")]
    assert _checks([fast, ModelFacts("bulk", _gpu(1), _entry("bulk", "batch"))]) == []
    # a group without gpus takes every GPU
    assert _checks([fast, ModelFacts("bulk", _gpu(), _entry("bulk", "batch"))]) == \
        [("fast", "latency_gpu_shared", "error")]
    # two latency-tier models: the placement policy's business, not this check's
    assert _checks([fast, ModelFacts("f2", _gpu(0), _entry("f2", "interactive"))]) == []


def test_llm_readiness_allowance_below_the_startup_allowance():
    llm = {"backend": "vllm"}
    slow = ModelFacts("llm", llm, _entry("llm", "standard", startup=900))
    assert _checks([slow], default_not_ready_allowance) == \
        [("llm", "llm_readiness_below_startup", "warning")]
    (f,) = lint([slow], default_not_ready_allowance)
    assert "startup_allowance.standard" in f.message and "900" in f.message
    alerting = parse_alerting_config({"platform": {"model_not_ready": {
        "startup_allowance": {"default": "10m", "standard": "20m"}}}})
    assert _checks([slow], not_ready_allowance(alerting)) == []
    assert _checks([slow]) == []  # no allowance given: not checked
    standalone = ModelFacts("llm", {}, _entry("llm", "standard", startup=900), runtime="vllm")
    assert _checks([standalone], default_not_ready_allowance) == \
        [("llm", "llm_readiness_below_startup", "warning")]
    not_llm = ModelFacts("r", {"backend": "python"}, _entry("r", "standard", startup=900))
    assert _checks([not_llm], default_not_ready_allowance) == []


def test_decoupled_model_without_first_response_histograms():
    cfg = {"backend": "python", "model_transaction_policy": {"decoupled": True}}
    assert _checks([ModelFacts("s", cfg, None, histogram_latencies=False)]) == \
        [("s", "decoupled_no_first_response_histogram", "warning")]
    assert _checks([ModelFacts("s", cfg, None, histogram_latencies=True)]) == []
    assert _checks([ModelFacts("s", cfg, None, histogram_latencies=None)]) == []
    assert _checks([ModelFacts("s", {"backend": "python"}, None, False)]) == []


def test_a_configuration_without_backend_or_platform_is_not_a_pass():
    """An empty ``config.pbtxt`` parses to ``{}``: Triton auto-completes it at load, so
    there is nothing here for the other checks to read."""
    assert _checks([ModelFacts("m", {}, _entry("m", "interactive"))]) == \
        [("m", "config_without_backend", "warning"),
         ("m", "latency_no_queue_timeout", "warning")]  # no timeout declared either
    assert _checks([ModelFacts("m", {"max_batch_size": 8}, None)]) == \
        [("m", "config_without_backend", "warning")]
    assert _checks([ModelFacts("m", {"platform": "onnxruntime_onnx"}, None)]) == []
    assert _checks([ModelFacts("m", {"backend": "onnxruntime"}, None)]) == []
    # an engine without a model configuration is not a Triton model
    assert _checks([ModelFacts("llm", {}, None, runtime="vllm")]) == []


def test_findings_line_and_exposition():
    facts = [ModelFacts("llm", {"backend": "vllm", "dynamic_batching": {}}, None)]
    (f,) = lint(facts)
    assert f.line().startswith("model llm: [error] dynamic_batching_llm_backend: ")
    fams = {m.name: m for m in text_string_to_metric_families(exposition([f]))}
    (s,) = fams["fleetwatch_model_config_findings"].samples
    assert s.labels == {"model": "llm", "check": "dynamic_batching_llm_backend",
                        "severity": "error"} and s.value == 1


def test_the_check_label_lists_every_check():
    """``fleetwatch_model_config_findings{check}``'s documented values are the checks."""
    (label,) = [lab for lab in LABELS if lab.name == "check"]
    assert label.values == CHECKS
