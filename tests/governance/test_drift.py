"""Drift: declared against running, field by field, and its exposition."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.governance.drift import compare, exposition
from fleetwatch.governance.running import RunningConfig, triton_running
from fleetwatch.labels.declared import DeclaredSpec

CONFIG = {"name": "ranker", "backend": "python",
          "instance_group": [{"name": "r_1", "kind": "KIND_GPU", "count": 2, "gpus": [1, 0]},
                             {"name": "r_0", "kind": "KIND_CPU", "count": 1, "gpus": []}],
          "dynamic_batching": {"max_queue_delay_microseconds": "500"}}
INDEX = [{"name": "ranker", "version": "10", "state": "READY"},
         {"name": "ranker", "version": "2", "state": "READY"},
         {"name": "ranker", "version": "3", "state": "UNAVAILABLE"},
         {"name": "other", "version": "1", "state": "READY"}]


def _declared(**kw):
    return DeclaredSpec.model_validate(kw)


def test_a_triton_model_as_it_runs():
    run = triton_running(CONFIG, INDEX, "ranker", {"engine_version": "2.51.0"})
    assert run.model_versions == ("2", "10")  # READY only, numeric order
    assert run.engine_version == "2.51.0" and run.quantization is None
    assert run.dynamic_batching is True
    assert [(g.kind, g.count, g.gpus) for g in run.instance_groups or ()] == \
        [("KIND_CPU", 1, ()), ("KIND_GPU", 2, (0, 1))]


def test_matching_fields_do_not_drift_whatever_the_order():
    run = triton_running(CONFIG, INDEX, "ranker", {"engine_version": "2.51.0"})
    spec = _declared(engine_version="2.51.0", dynamic_batching=True, instance_groups=[
        {"kind": "KIND_GPU", "count": 2, "gpus": [0, 1]}, {"kind": "KIND_CPU"}])
    rows = compare("ranker", spec, run)
    assert [(d.field, d.drifted) for d in rows] == [
        ("engine_version", False), ("instance_groups", False), ("dynamic_batching", False)]


def test_another_version_loaded_drifts_with_both_values():
    run = triton_running(CONFIG, INDEX, "ranker", None)
    (row,) = compare("ranker", _declared(model_version="2"), run)
    assert (row.field, row.declared, row.running, row.drifted) == \
        ("model_version", "2", "2,10", True)


def test_fields_the_server_does_not_report_are_not_compared():
    run = RunningConfig(engine_version="0.32.0")  # vLLM: identity only
    rows = compare("m", _declared(engine_version="0.31.0", quantization="fp8",
                                  dynamic_batching=False), run)
    assert [(d.field, d.declared, d.running) for d in rows] == \
        [("engine_version", "0.31.0", "0.32.0")]


def test_an_unreadable_configuration_leaves_its_fields_unknown():
    run = triton_running("<html>", "not a list", "ranker", None)
    assert run == RunningConfig()
    assert compare("ranker", _declared(model_version="1", dynamic_batching=True), run) == []


def test_exposition_parses_and_carries_values():
    run = triton_running(CONFIG, INDEX, "ranker", None)
    rows = compare("ranker", _declared(model_version="2", dynamic_batching=True), run)
    text = exposition(rows, {("ranker", "triton"): 3})
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    drift = {s.labels["field"]: s.value for s in fams["fleetwatch_config_drift"].samples}
    assert drift == {"model_version": 1.0, "dynamic_batching": 0.0}
    info = [s.labels for s in fams["fleetwatch_config_drift_info"].samples]
    assert {"model": "ranker", "field": "model_version", "declared": "2",
            "running": "2,10"} in info
    (change,) = fams["modelserver_model_config_changes"].samples
    assert change.labels == {"model": "ranker", "backend": "triton"} and change.value == 3


def test_the_index_grouped_by_model_gives_the_same_versions():
    from fleetwatch.governance.running import index_by_model

    grouped = index_by_model(INDEX)
    assert grouped is not None and set(grouped) == {"ranker", "other"}
    assert triton_running(CONFIG, grouped["ranker"], "ranker", None) == \
        triton_running(CONFIG, INDEX, "ranker", None)
    assert index_by_model({"error": "x"}) is None
