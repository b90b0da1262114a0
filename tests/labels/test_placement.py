"""The declared GPU placement (fleetwatch.labels.placement) in the sidecar config."""

from __future__ import annotations

import pytest

from fleetwatch.labels.placement import GPUPlacement, Placement
from fleetwatch.sidecar.config import ConfigError, parse_config

BASE = {"targets": [{"name": "t", "url": "http://127.0.0.1:1/metrics"}]}


def _config(placement: object) -> Placement:
    return parse_config({**BASE, "placement": placement}, "s.yaml").declared_placement()


def test_lookups_by_model_and_gpu() -> None:
    p = _config([{"gpu_uuid": "G0", "models": [{"model": "a"}, {"model": "b", "instances": 2}]},
                 {"gpu_uuid": "G1", "models": [{"model": "a", "model_version": "2"}]},
                 {"gpu_uuid": "G2", "models": [{"model": "c"}]}])
    assert p.gpus_of("a") == {"G0", "G1"}
    assert p.neighbours("a") == {"b"} and p.neighbours("b") == {"a"}
    assert p.neighbours("c") == frozenset() and p.gpus_of("unknown") == frozenset()
    assert list(p.rows()) == [("a", "", "G0", 1), ("b", "", "G0", 2), ("a", "2", "G1", 1),
                              ("c", "", "G2", 1)]
    assert [m.model for m in p.models_on("G0")] == ["a", "b"] and p.models_on("G9") == ()


def test_no_placement_is_empty() -> None:
    p = parse_config(BASE, "s.yaml").declared_placement()
    assert not p and p.gpus == ()


def test_merged_lets_discovered_facts_win() -> None:
    declared = Placement([GPUPlacement(gpu_uuid="G0", models=[{"model": "a"}])])  # type: ignore[list-item]
    found = Placement([GPUPlacement(gpu_uuid="G0", models=[{"model": "b"}])])  # type: ignore[list-item]
    merged = declared.merged(found)
    assert [m.model for m in merged.models_on("G0")] == ["b"]


@pytest.mark.parametrize(("placement", "message"), [
    ([{"gpu_uuid": "G0", "models": [{"model": "a"}]},
      {"gpu_uuid": "G0", "models": [{"model": "b"}]}], "[1].gpu_uuid: 'G0' is already"),
    ([{"gpu_uuid": "G0", "models": [{"model": "a"}, {"model": "a"}]}],
     "placement[0]: models[1]: 'a' version '' is listed twice"),
    ([{"gpu_uuid": "G0", "models": [{"model": "a", "instances": 0}]}],
     "placement[0].models[0].instances"),
    ([{"gpu_uuid": "G0", "models": [{"model": "a", "instances": True}]}],
     "placement[0].models[0].instances"),
    ([{"gpu_uuid": "G0", "models": []}], "placement[0].models"),
    ([{"gpu_uuid": "G0", "models": [{"model": "a"}], "gpu": 1}], "placement[0].gpu"),
])
def test_bad_placement_names_file_and_field(placement: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config(placement)
    assert str(err.value).startswith("s.yaml: ") and message in str(err.value)
