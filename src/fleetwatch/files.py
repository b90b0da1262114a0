"""Writing what the generators return: ``{relative path: text}`` under one folder.

The generators (rules, Alertmanager, dashboards, manifests) are pure and return file trees;
this is the one place that writes them (UTF-8, folders created). Raises ``OSError`` (the
commands map it to exit 1 naming the path).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_tree(files: Mapping[str, str], out_dir: str | Path) -> list[Path]:
    """Write each ``files[rel]`` to ``out_dir/rel`` (parents created); the paths, in order."""
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
