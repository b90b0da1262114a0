"""``fleetwatch lint --model-repository``: findings, exit codes, bad input (subprocess)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import yaml

from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY
from tests.support.hostile import cli

REGISTRY = {"models": [
    {"name": "ranker", "team": "search", "owner": "a@example.com", "oncall": "s",
     "latency_tier": "interactive"},
    {"name": "bulk", "team": "batch", "owner": "b@example.com", "oncall": "b",
     "latency_tier": "batch"}]}

LLM = '''name: "llm"
backend: "vllm"
dynamic_batching { max_queue_delay_microseconds: 100 }
'''
SHARED = '''name: "{name}"
backend: "onnxruntime"
dynamic_batching {{ default_queue_policy {{ default_timeout_microseconds: 5000 }} }}
instance_group [ {{ kind: KIND_GPU count: 1 gpus: [ 0 ] }} ]
'''


def _repo(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(DEFAULT_MODEL_REPOSITORY / "streamer", root / "streamer")
    shutil.copytree(DEFAULT_MODEL_REPOSITORY / "ranker", root / "ranker")
    for name, text in (("llm", LLM), ("fast", SHARED.format(name="fast")),
                       ("bulk", SHARED.format(name="bulk"))):
        (root / name).mkdir()
        (root / name / "config.pbtxt").write_text(text)
    reg = {"models": [*REGISTRY["models"],
                      {"name": "fast", "team": "s", "owner": "f@example.com", "oncall": "s",
                       "latency_tier": "interactive"}]}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(reg))
    return root


def test_findings_one_line_each_exit_1(tmp_path):
    root = _repo(tmp_path)
    r = cli("lint", "--model-repository", str(root), "--registry",
            str(tmp_path / "registry.yaml"), "--no-histogram-latencies")
    assert r.returncode == 1, r.stderr
    heads = [ln.split(":", 2)[0] + ":" + ln.split(":", 2)[1] for ln in r.stdout.splitlines()]
    assert heads == ["model fast: [error] latency_gpu_shared",
                     "model llm: [error] dynamic_batching_llm_backend",
                     "model ranker: [warning] latency_no_queue_timeout",
                     "model streamer: [warning] decoupled_no_first_response_histogram"]
    assert "shared with throughput-tier model(s) bulk" in r.stdout
    assert r.stderr.strip().endswith("5 models checked, 4 findings")


def test_histogram_latencies_on_clears_that_finding(tmp_path):
    root = _repo(tmp_path)
    r = cli("lint", "--model-repository", str(root), "--registry",
            str(tmp_path / "registry.yaml"), "--histogram-latencies")
    assert "decoupled_no_first_response_histogram" not in r.stdout
    assert r.returncode == 1


def test_a_clean_repository_exits_0(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(DEFAULT_MODEL_REPOSITORY / "faulty", root / "faulty")
    r = cli("lint", "--model-repository", str(root))
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    assert "1 model checked, 0 findings" in r.stderr


def test_an_empty_config_pbtxt_is_a_finding_not_a_pass(tmp_path):
    root = tmp_path / "repo"
    (root / "m" / "1").mkdir(parents=True)
    (root / "m" / "config.pbtxt").write_text("# completed by Triton at load\n")
    r = cli("lint", "--model-repository", str(root))
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("model m: [warning] config_without_backend: ")
    assert "--config" in r.stdout


def test_bad_input_exit_2_naming_the_file(tmp_path):
    root = tmp_path / "repo"
    (root / "m").mkdir(parents=True)
    (root / "m" / "config.pbtxt").write_text("instance_group [ { kind: KIND_TPU } ]\n")
    r = cli("lint", "--model-repository", str(root))
    assert r.returncode == 2
    assert f"{root / 'm' / 'config.pbtxt'}: not a Triton model configuration: 1:" in r.stderr
    r = cli("lint")
    assert r.returncode == 2 and "exactly one of --config and --model-repository" in r.stderr


def test_a_repository_that_is_not_one_exits_2_naming_it(tmp_path):
    # an empty directory has nothing to check: not a pass; a file, an empty directory and a
    # missing one get the same kind of message
    empty, a_file, missing = tmp_path / "empty", tmp_path / "config.pbtxt", tmp_path / "nosuch"
    empty.mkdir()
    a_file.write_text(LLM)
    for path, why in ((empty, "no <model>/config.pbtxt in it"), (a_file, "not a directory"),
                      (missing, "not a directory")):
        r = cli("lint", "--model-repository", str(path))
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert r.stderr == (f"fleetwatch: error: {path}: {why} (expected a Triton model "
                            "repository)\n")


def test_without_tritonclient_it_exits_1_with_the_extra_to_install(tmp_path):
    """A plain ``pip install .`` has no ``config.pbtxt`` parser: that is the installation's
    fault, not the repository's (exit 1, not 2), said in one line naming the extra."""
    hide = ("import sys; sys.modules['tritonclient'] = None; from fleetwatch.cli import main; "
            "main()")
    res = subprocess.run([sys.executable, "-c", hide, "lint", "--model-repository",
                          str(_repo(tmp_path))], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (1, ""), res.stderr
    line, = res.stderr.splitlines()
    assert line.startswith("fleetwatch: error: reading config.pbtxt needs tritonclient (")
    assert line.endswith("install the 'triton' extra (pip install '.[triton]' from a clone) "
                         "or pip install 'tritonclient[grpc]'")
