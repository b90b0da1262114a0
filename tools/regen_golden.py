"""Regenerate tests/golden/: the normalized form of every exposition fixture.

    python tools/regen_golden.py [FIXTURE ...]

Each fixture ``tests/fixtures/expositions/<dir>/<name>`` becomes
``tests/golden/<dir>/<name>.normalized.prom`` (stdout of ``fleetwatch normalize`` with the
test registry) plus a ``.summary`` line (source kind, counts, skipped lines). Review the
diff before committing: the golden files are the contract of the mappings. With FIXTURE
arguments (paths of fixture files), only their golden files are written.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tools.golden import golden_outputs  # noqa: E402


def main() -> None:
    fixtures = ROOT / "tests" / "fixtures" / "expositions"
    out_dir = ROOT / "tests" / "golden"
    registry = ROOT / "tests" / "data" / "registry.yaml"
    only = {str(Path(a).resolve().relative_to(fixtures)) for a in sys.argv[1:]}
    written = 0
    for rel, body in golden_outputs(fixtures, registry).items():
        if only and not any(rel.startswith(name + ".") for name in only):
            continue
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        written += 1
    print(f"wrote {written} golden files under {out_dir.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
