"""Regenerate tests/golden/governance/: ``fleetwatch rollout analysis`` with its defaults
(the Argo Rollouts AnalysisTemplate and the Flagger MetricTemplate of the rollout gate).

    python tools/regen_governance_golden.py

The folder is emptied first. tests/governance/test_analysis.py compares the generator's
output with these files byte for byte and validates them against the CRD schemas.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from fleetwatch.files import write_tree  # noqa: E402
from fleetwatch.governance.analysis import GateSettings, yaml_files  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "governance"


def golden_files() -> dict[str, str]:
    """``{file name: text}`` of the golden templates (what the test compares)."""
    return yaml_files(GateSettings())


def main() -> None:
    files = golden_files()
    shutil.rmtree(GOLDEN, ignore_errors=True)
    write_tree(files, GOLDEN)
    print(f"regenerated {GOLDEN.relative_to(ROOT)} ({len(files)} files)")


if __name__ == "__main__":
    main()
