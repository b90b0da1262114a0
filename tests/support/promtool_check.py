"""``promtool check metrics`` on an exposition: parse errors, duplicates and lint findings.

promtool 2.42 lints and has no switch to stop it, so its findings are split: a parse error
(``text format parsing error``, ``second HELP line``, ``second TYPE line``) or a duplicate is
a failure; a lint finding on fleetwatch's own families must be listed in
``schema_doc.LINT_EXCEPTIONS`` (docs/metrics.md); upstream families passed through keep
their names, lint or not.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.schema_doc import LINT_EXCEPTIONS

_OURS = ("modelserver_", "fleetwatch_")


def check_metrics(text: str) -> list[str]:
    """Problems with ``text`` as a /metrics body ([] when none); raises when promtool is
    missing (never skips)."""
    if shutil.which("promtool") is None:
        raise RuntimeError("promtool not found: install Debian's prometheus (.ci/run)")
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=60)
    problems: list[str] = []
    allowed = {(fam, finding) for fam, finding, _why in LINT_EXCEPTIONS}
    for line in (res.stdout + res.stderr).splitlines():
        line = line.strip()
        if not line:
            continue
        if line.lower().startswith("error") or "parsing error" in line \
                or "second HELP" in line or "second TYPE" in line or "duplicate" in line:
            problems.append(f"promtool: {line}")
            continue
        name, _, finding = line.partition(" ")
        if name.startswith(_OURS) and (name, finding) not in allowed:
            problems.append(f"lint on fleetwatch's own family: {line}")
    samples, meta = parse_exposition(text)
    problems += [f"unparsable: {bad.reason}: {bad.line}" for bad in meta.invalid]
    counts = Counter((name, tuple(sorted(labels))) for name, labels, _v in samples)
    problems += [f"series twice: {key}" for key, n in counts.items() if n > 1]
    helps = Counter(line.split()[2] for line in text.splitlines() if line.startswith("# HELP "))
    problems += [f"HELP twice: {name}" for name, n in helps.items() if n > 1]
    return problems
