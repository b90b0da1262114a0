"""Check that every relative link of the prose documentation resolves.

    python tools/check_doc_links.py

Reads README.md, CONTRIBUTING.md, tools/README.md, docs/*.md and benchmarks/results/*.md
(fenced code blocks left out). A link or image whose target is not a URL must name a file
or folder of the repository and, when it has a ``#fragment`` into a Markdown file, a
heading of that file (GitHub's anchor rule: lower case, punctuation dropped, spaces as
hyphens). Prints each broken link as ``FILE: broken link TARGET``; exit 1 when there is one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_HEADING = re.compile(r"^#+\s+(.*)$", re.M)


def documents(root: Path) -> list[Path]:
    """The Markdown files whose links are checked, in a stable order."""
    fixed = [root / "README.md", root / "CONTRIBUTING.md", root / "tools" / "README.md"]
    return [p for p in fixed if p.exists()] + sorted((root / "docs").glob("*.md")) + sorted(
        (root / "benchmarks" / "results").glob("*.md"))


def anchors(path: Path) -> set[str]:
    """GitHub's anchor of every heading of a Markdown file."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in _HEADING.findall(text)}


def broken_links(path: Path) -> list[str]:
    """The relative link targets of ``path`` that resolve to no file or no heading."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    bad = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        missing_heading = (resolved.exists() and bool(fragment) and resolved.suffix == ".md"
                           and fragment not in anchors(resolved))
        if not resolved.exists() or missing_heading:
            bad.append(target)
    return bad


def main() -> int:
    failures = 0
    for doc in documents(ROOT):
        for target in broken_links(doc):
            print(f"{doc.relative_to(ROOT)}: broken link {target}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
