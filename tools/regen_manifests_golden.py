"""Regenerate tests/golden/manifests/: ``fleetwatch manifests`` on the examples.

    python tools/regen_manifests_golden.py

Inputs: examples/sidecar.yaml (Triton pods), examples/sidecar-vllm.yaml (vLLM pods),
examples/sidecar-vllm-{prefill,decode}.yaml (a disaggregated model's two pools),
examples/models.yaml (five deployments), examples/slos.yaml, examples/receivers.yaml, with
``--release kube-prometheus-stack``. The folder is emptied first, so a file the generator
no longer writes disappears. Review the diff before committing: tests/manifests/test_manifests.py
compares the generator's output with these files byte for byte.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from fleetwatch.files import write_tree as write_files  # noqa: E402
from fleetwatch.manifests import Settings, build, load_inputs  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "manifests"
EXAMPLES = ROOT / "examples"
CONFIGS = [str(EXAMPLES / name) for name in (
    "sidecar.yaml", "sidecar-vllm.yaml", "sidecar-vllm-prefill.yaml",
    "sidecar-vllm-decode.yaml")]
SETTINGS = Settings(release="kube-prometheus-stack")


def golden_files() -> dict[str, str]:
    """``{relative path: text}`` of the golden manifests (what the test compares)."""
    inputs = load_inputs(CONFIGS, str(EXAMPLES / "models.yaml"), str(EXAMPLES / "slos.yaml"),
                         str(EXAMPLES / "receivers.yaml"))
    files, _warnings = build(inputs, SETTINGS)
    return files


def main() -> None:
    files = golden_files()
    shutil.rmtree(GOLDEN, ignore_errors=True)
    write_files(files, GOLDEN)
    print(f"regenerated {GOLDEN.relative_to(ROOT)} ({len(files)} files)")


if __name__ == "__main__":
    main()
