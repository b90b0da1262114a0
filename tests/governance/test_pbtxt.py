"""config.pbtxt read with Triton's model_config.proto, in the JSON form of /v2/.../config."""

from __future__ import annotations

import pytest

from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY
from fleetwatch.governance.pbtxt import RepositoryError, parse_config, read_repository


def test_the_demo_repository_reads_as_triton_answers():
    models = {m.name: m.config for m in read_repository(DEFAULT_MODEL_REPOSITORY)}
    assert {"ranker", "streamer", "faulty"} <= set(models)
    # int64 fields come as strings, as Triton's JSON answer writes them
    assert models["ranker"]["dynamic_batching"] == {"max_queue_delay_microseconds": "500"}
    assert models["streamer"]["model_transaction_policy"] == {"decoupled": True}
    assert models["faulty"]["instance_group"] == [{"count": 1, "kind": "KIND_CPU"}]


def test_a_bad_configuration_names_the_file_and_the_place():
    with pytest.raises(RepositoryError) as exc:
        parse_config('name: "x"\ninstance_group [ { kind: KIND_TPU } ]\n', "m/config.pbtxt")
    assert str(exc.value).startswith("m/config.pbtxt: not a Triton model configuration: 2:")
    with pytest.raises(RepositoryError, match="dynamic_batchin"):
        parse_config("dynamic_batchin { }", "m/config.pbtxt")


def test_not_a_directory(tmp_path):
    with pytest.raises(RepositoryError, match="not a directory"):
        read_repository(tmp_path / "missing")


def test_an_unreadable_configuration_is_said_in_words(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.pbtxt").mkdir()  # a folder where the file should be
    with pytest.raises(RepositoryError) as exc:
        read_repository(tmp_path)
    assert str(exc.value) == f"{tmp_path / 'a' / 'config.pbtxt'}: cannot read: Is a directory"
    (tmp_path / "a" / "config.pbtxt").rmdir()
    (tmp_path / "a" / "config.pbtxt").write_bytes(b'name: "a"\n\xff\n')
    with pytest.raises(RepositoryError) as exc:
        read_repository(tmp_path)
    assert str(exc.value) == f"{tmp_path / 'a' / 'config.pbtxt'}: not UTF-8 text (byte 10)"
