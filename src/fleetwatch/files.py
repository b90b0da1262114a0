"""Writing what the generators return: ``{relative path: text}`` under one folder.

The generators (rules, Alertmanager, dashboards, manifests) are pure and return file trees;
this is the one place that writes them (UTF-8, folders created). Raises ``OSError`` (the
commands map it to exit 1 naming the path). :class:`BlockDumper` is the YAML style the
rule files, Alertmanager configs and Kubernetes manifests share.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


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


class BlockDumper(yaml.SafeDumper):
    """Block style YAML: multi-line strings (PromQL, configs) as ``|`` literals, lists
    indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> Any:
        return super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


BlockDumper.add_representer(str, _str)
