"""Regenerate tests/golden/alerts/: every output of the rules generator (rule files,
PrometheusRule, behaviour tests, Alertmanager configuration) for the inputs under
``tests/golden/alerts/input`` (registry, SLO file) and ``examples/receivers.yaml``.

    .venv/bin/python tools/regen_alert_goldens.py

Paths are relative to the repository root (this file's parent's parent), whatever the
current directory. Stale files under tests/golden/alerts are removed. Review the diff
before committing. ``tests/alerts/test_golden.py`` compares against :func:`golden_outputs`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "golden" / "alerts"
INPUT_DIR = GOLDEN_DIR / "input"
RECEIVERS = ROOT / "examples" / "receivers.yaml"


def golden_outputs() -> dict[str, str]:
    """``{path relative to tests/golden/alerts: text}`` of every generated file. Raises
    what the generator raises (``InputError``, ``BehaviourTestError``)."""
    from fleetwatch.alerts.generate import (
        ALERTMANAGER_FILE,
        build_alertmanager_file,
        build_rules,
        load_inputs,
        source_names,
    )

    registry_path, slos_path = INPUT_DIR / "registry.yaml", INPUT_DIR / "slos.yaml"
    registry, slos, cfg = load_inputs(registry_path, slos_path, RECEIVERS)
    if slos is None:  # pragma: no cover - load_inputs returns one for a path
        raise RuntimeError(f"{slos_path}: no SLO file")
    sources = source_names(registry_path, slos_path, RECEIVERS)
    out = build_rules(registry, slos, cfg, sources, tests=True)
    out[ALERTMANAGER_FILE], _ = build_alertmanager_file(registry, cfg, slos, sources)
    return out


def main() -> int:
    if not INPUT_DIR.is_dir():
        print(f"{INPUT_DIR}: not found", file=sys.stderr)
        return 2
    outputs = golden_outputs()
    for rel, text in outputs.items():
        path = GOLDEN_DIR / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    stale = sorted(p for p in GOLDEN_DIR.iterdir() if p.is_file() and p.name not in outputs)
    for p in stale:
        p.unlink()
    print(f"wrote {len(outputs)} golden files under {GOLDEN_DIR.relative_to(ROOT)}"
          + (f", removed {len(stale)} stale" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
