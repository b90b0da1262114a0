"""The registry's ``declared:`` block: strict validation, errors naming file, entry, field."""

from __future__ import annotations

import pytest

from fleetwatch.labels.registry import RegistryError, load_registry

ENTRY = "models:\n  - {{name: ranker, team: t, owner: o, oncall: c, declared: {body}}}\n"


def _load(tmp_path, body):
    p = tmp_path / "registry.yaml"
    p.write_text(ENTRY.format(body=body))
    return load_registry(p)


def test_a_full_declaration_is_read(tmp_path):
    reg = _load(tmp_path, '{engine_version: "2.51.0", quantization: fp8, model_version: "2", '
                          'dynamic_batching: false, instance_groups: '
                          '[{kind: KIND_GPU, count: 2, gpus: [1, 0]}, {kind: KIND_CPU}]}')
    d = reg.entries[0].declared
    assert d is not None
    assert (d.engine_version, d.quantization, d.model_version, d.dynamic_batching) == \
        ("2.51.0", "fp8", "2", False)
    assert [(g.kind, g.count, g.gpus) for g in d.instance_groups or ()] == \
        [("KIND_GPU", 2, (1, 0)), ("KIND_CPU", 1, ())]


@pytest.mark.parametrize(("body", "field", "words"), [
    ("{engine: x}", "declared.engine", "unknown field"),
    ("{model_version: 2}", "declared.model_version", 'quote it, e.g. model_version: "2"'),
    ("{engine_version: 2.51}", "declared.engine_version", "quote it"),
    ("{quantization: FP8}", "declared.quantization", "not a quantization name"),
    ("{dynamic_batching: 1}", "declared.dynamic_batching", "boolean"),
    ("{instance_groups: [{kind: GPU, count: 1}]}", "declared.instance_groups.0.kind",
     "KIND_GPU"),
    ("{instance_groups: [{kind: KIND_GPU, count: 0}]}", "declared.instance_groups.0.count",
     "greater than or equal to 1"),
    ("{instance_groups: [{kind: KIND_GPU, gpus: [true]}]}",
     "declared.instance_groups.0.gpus.0", "integer"),
    ("{instance_groups: []}", "declared.instance_groups", "at least 1"),
])
def test_bad_declarations_name_file_entry_and_field(tmp_path, body, field, words):
    with pytest.raises(RegistryError) as exc:
        _load(tmp_path, body)
    msg = str(exc.value)
    assert msg.startswith(f"{tmp_path / 'registry.yaml'}: models[0] (name 'ranker'): "
                          f"field {field!r}: "), msg
    assert words in msg, msg
