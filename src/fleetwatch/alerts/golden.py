"""Golden files of the rules generator: every output for the inputs under
``tests/golden/alerts/input`` (registry, SLO file) and ``examples/receivers.yaml``.

Regenerate (from the repository root, then review the diff)::

    .venv/bin/python -m fleetwatch.alerts.golden
"""

from __future__ import annotations

import sys
from pathlib import Path

from fleetwatch.alerts.generate import (
    ALERTMANAGER_FILE,
    build_alertmanager_file,
    build_rules,
    load_inputs,
    source_names,
)

GOLDEN_DIR = Path("tests") / "golden" / "alerts"
INPUT_DIR = GOLDEN_DIR / "input"
RECEIVERS = Path("examples") / "receivers.yaml"


def golden_outputs(root: Path) -> dict[str, str]:
    """``{path relative to tests/golden/alerts: text}`` of every generated file."""
    registry_path = root / INPUT_DIR / "registry.yaml"
    slos_path = root / INPUT_DIR / "slos.yaml"
    receivers_path = root / RECEIVERS
    registry, slos, cfg = load_inputs(registry_path, slos_path, receivers_path)
    assert slos is not None
    sources = source_names(registry_path, slos_path, receivers_path)
    out = build_rules(registry, slos, cfg, sources, tests=True)
    out[ALERTMANAGER_FILE], _ = build_alertmanager_file(registry, cfg, slos, sources)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path.cwd()
    if not (root / INPUT_DIR).is_dir():
        print(f"{root / INPUT_DIR}: not found; run from the repository root", file=sys.stderr)
        return 2
    outputs = golden_outputs(root)
    for rel, text in outputs.items():
        path = root / GOLDEN_DIR / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    stale = sorted(p for p in (root / GOLDEN_DIR).iterdir()
                   if p.is_file() and p.name not in outputs)
    for p in stale:
        p.unlink()
    print(f"wrote {len(outputs)} golden files under {GOLDEN_DIR}"
          + (f", removed {len(stale)} stale" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
