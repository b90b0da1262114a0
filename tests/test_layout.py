"""The package layout as tests: no import cycle between subpackages, the exporters do no
I/O, long modules say why, and the generator commands need no extras."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from tests.helpers import ROOT

PKG = ROOT / "src" / "fleetwatch"
#: Subpackages whose module size this branch answers for (others are being split elsewhere).
SIZE_CHECKED = ("exporters", "sidecar", "labels")


def _node(module: str) -> str:
    """``fleetwatch.exporters.sources.vllm`` → ``exporters``; top-level modules are
    their own nodes (``cli``, ``specfile``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        src = _node(".".join(rel.parts))
        deps = graph.setdefault(src, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.startswith("fleetwatch.") and _node(name) != src:
                    deps.add(_node(name))
    return graph


def test_no_import_cycle_between_subpackages():
    graph = _imports()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path[path.index(m):], m]))
            if m not in state:
                visit(m)
        path.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_layers():
    """labels → exporters → slo → … → sidecar: lower layers never import higher ones."""
    graph = _imports()
    assert graph["labels"] <= {"specfile"}, graph["labels"]
    assert graph["exporters"] <= {"labels"}, graph["exporters"]
    assert "sidecar" not in graph["slo"] and "exporters" not in graph.get("specfile", set())


def test_exporters_do_no_io():
    code = ("import json, sys, pkgutil, importlib, fleetwatch.exporters as e\n"
            "for m in pkgutil.walk_packages(e.__path__, 'fleetwatch.exporters.'):\n"
            "    importlib.import_module(m.name)\n"
            "print(json.dumps(sorted(sys.modules)))")
    mods = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                         text=True, check=True).stdout))
    for banned in ("aiohttp", "fleetwatch.slo", "fleetwatch.sidecar", "numpy", "urllib.request"):
        assert not any(m == banned or m.startswith(banned + ".") for m in mods), banned


def test_generator_commands_need_no_extras(tmp_path):
    """normalize, validate and schema import neither Triton's wheels nor numpy nor the demo."""
    fixture = ROOT / "tests" / "fixtures" / "expositions" / "sglang" / \
        "sglang-v0.5.10.post1-datadog-opt125m-trimmed.prom"
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from fleetwatch.cli import main\n"
        "r = CliRunner()\n"
        f"for args in (['normalize', {str(fixture)!r}], ['schema'], ['schema', '--markdown'],\n"
        f"             ['validate', '--config', {str(ROOT / 'examples' / 'sidecar.yaml')!r}]):\n"
        "    res = r.invoke(main, args)\n"
        "    assert res.exit_code == 0, (args, res.output)\n"
        "print(json.dumps(sorted(sys.modules)))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    mods = set(json.loads(res.stdout.splitlines()[-1]))
    for banned in ("tritonclient", "pytriton", "numpy", "fleetwatch.demo"):
        assert not any(m == banned or m.startswith(banned + ".") for m in mods), banned


@pytest.mark.parametrize("sub", SIZE_CHECKED)
def test_long_modules_say_why(sub):
    for path in sorted((PKG / sub).rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 400:
            head = "\n".join(lines[:30]).lower()
            assert "why this module is long" in head, f"{path}: {len(lines)} lines"
