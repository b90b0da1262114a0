"""The house's layout as tests: an acyclic stack of subpackages, modules of one concept,
functions short or saying why, exporters without I/O, generator commands without extras.

The import graph is read from the sources (``ast``), every import counted — module level,
inside functions, and under ``TYPE_CHECKING`` alike — so a lazy import cannot hide a cycle.
The layers, lowest first (a module may import its own layer and the layers below):

    labels → exporters → slo → alerts, traces, rollout → dashboards, page, governance → sidecar → manifests → demo
    → commands/cli

``fleetwatch/__init__.py`` (the version) is importable from anywhere.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT

SRC = Path(__file__).resolve().parents[1] / "src" / "fleetwatch"

#: Layer of each subpackage or top-level module (lowest first). A new subpackage must be
#: placed here: the test below fails for one it does not know.
LAYERS: dict[str, int] = {
    "__init__": 0,
    "specfile": 0,
    "files": 0,
    "wording": 0,  # counts in English ("1 file", "3 files")
    "labels": 1,
    "exporters": 2,
    "slo": 3,
    "promql": 3,
    "alerts": 4,
    "gpu": 4,  # shared GPUs: placement, footprints, quotas, the rollout plan (pure)
    "traces": 4,  # per-request facts from OTLP spans: pure, below the sidecar's receiver
    "rollout": 4,  # version comparison by band and baselines: pure, from the SLO engine
    "governance": 5,  # declared vs running, lint, change review, rollout steps and gates: pure
    "autoscale": 4,  # traces, the HPA algorithm, policies and the advisory twin: pure
    "dashboards": 5,
    "schema_doc": 5,
    "page": 5,  # the status page renderer: pure, from the /slo and /autoscaling documents
    "otlp": 5,  # OTLP in and out: span decoding, the trace receiver, the metrics export
    "clients": 5,  # the model servers' clients, shared by the demo and the commands
    "sidecar": 6,
    "manifests": 7,  # generator of the sidecar's own pod: reads the sidecar config schema
    "demo": 8,
    "commands": 9,
    "cli": 10,
    "__main__": 11,
}

#: A module longer than this needs a reason near its top: a line containing LONG_MARK.
MAX_LINES = 400
LONG_MARK = "Why this module is long"
#: A function longer than this (``def`` to its last line) needs FUNCTION_LONG_MARK in its
#: docstring, one with more parameters than MAX_PARAMETERS (``self``/``cls`` not counted,
#: ``*args``/``**kwargs`` counted) MANY_PARAMETERS_MARK, each followed by the reason.
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8
FUNCTION_LONG_MARK = "Why this function is long:"
MANY_PARAMETERS_MARK = "Many parameters:"


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "model_repository" not in p.parts)


def _unit(path: Path) -> str:
    """The subpackage (or top-level module) a source file belongs to."""
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every ``fleetwatch.*`` module ``path`` imports (absolute or relative)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("fleetwatch"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("fleetwatch"):
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)
    return found


def _unit_of_module(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1] if (SRC / parts[1]).is_dir() or (SRC / f"{parts[1]}.py").exists() else None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _modules():
        unit = _unit(path)
        deps = graph.setdefault(unit, set())
        for mod in _imports(path):
            target = _unit_of_module(mod)
            if target is not None and target != unit:
                deps.add(target)
    return graph


def test_every_subpackage_has_a_layer() -> None:
    unknown = sorted(set(_graph()) - set(LAYERS))
    assert not unknown, f"place these in LAYERS (tests/test_layout.py): {unknown}"


def test_imports_go_down_the_stack_only() -> None:
    bad = [f"{unit} (layer {LAYERS[unit]}) imports {dep} (layer {LAYERS[dep]})"
           for unit, deps in sorted(_graph().items()) if unit in LAYERS
           for dep in sorted(deps) if dep in LAYERS and LAYERS[dep] > LAYERS[unit]]
    assert not bad, "\n".join(bad)


def test_no_cycle_between_subpackages() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep):], dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            pytest.fail("import cycle: " + " → ".join(cycle))


def test_the_graph_reader_sees_a_cycle(tmp_path: Path) -> None:
    """The reader is not blind: relative and function-level imports are counted."""
    pkg = tmp_path / "fleetwatch"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "x.py").write_text("def f():\n    from ..b import y\n")
    (pkg / "b").mkdir()
    (pkg / "b" / "y.py").write_text("from fleetwatch.a.x import f\n")
    assert "fleetwatch.b" in _imports_at(pkg, pkg / "a" / "x.py")
    assert "fleetwatch.a.x" in _imports_at(pkg, pkg / "b" / "y.py")


def _imports_at(root: Path, path: Path) -> set[str]:
    global SRC
    saved, SRC = SRC, root
    try:
        return _imports(path)
    finally:
        SRC = saved


def test_modules_are_one_concept_in_size() -> None:
    long = []
    for path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and not any(LONG_MARK in line for line in lines[:60]):
            long.append(f"{path.relative_to(SRC)}: {len(lines)} lines")
    assert not long, (f"split these, or say near the top why not ('{LONG_MARK}: …'):\n"
                      + "\n".join(long))


#: Modules that only wire the modules their docstrings name, held to these sizes without
#: the way out of LONG_MARK: what they grow by belongs in the stages they run.
ORCHESTRATORS: dict[str, int] = {
    "slo/engine.py": 230,  # the SLO engine's stages (slo/decode, account, judge, …)
    "exporters/normalize.py": MAX_LINES,  # the normalizer's loop (reading, emit, families, …)
    # compiling a series (plans, labelblocks, blockmaps, unmapped, owners, entry)
    "exporters/compile.py": 380,
}


def test_orchestrators_stay_small() -> None:
    long = [f"{name}: {n} lines (at most {limit})" for name, limit in ORCHESTRATORS.items()
            if (n := len((SRC / name).read_text(encoding="utf-8").splitlines())) > limit]
    assert not long, ("move what is not orchestration into the stage it belongs to:\n"
                      + "\n".join(long))


def _unjustified_functions(path: Path) -> list[str]:
    """The functions of ``path`` over :data:`MAX_FUNCTION_LINES` lines or
    :data:`MAX_PARAMETERS` parameters whose docstring does not give the reason (the
    mark, then some text), as ``file:line name: what``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        n_params = len(params) + (a.vararg is not None) + (a.kwarg is not None)
        n_lines = (node.end_lineno or node.lineno) - node.lineno + 1
        doc = ast.get_docstring(node) or ""
        for over, mark, what in ((n_lines > MAX_FUNCTION_LINES, FUNCTION_LONG_MARK,
                                  f"{n_lines} lines"),
                                 (n_params > MAX_PARAMETERS, MANY_PARAMETERS_MARK,
                                  f"{n_params} parameters")):
            if over and not (mark in doc and doc.split(mark, 1)[1].strip()):
                found.append(f"{path.name}:{node.lineno} {node.name}: {what}")
    return found


def test_functions_are_short_or_say_why() -> None:
    found = [f"{path.relative_to(SRC).parent}/{line}" for path in _modules()
             for line in _unjustified_functions(path)]
    assert not found, (
        f"split these into named steps, or give the reason in the docstring "
        f"('{FUNCTION_LONG_MARK} …' over {MAX_FUNCTION_LINES} lines, "
        f"'{MANY_PARAMETERS_MARK} …' over {MAX_PARAMETERS} parameters):\n" + "\n".join(found))


def test_the_function_check_sees_long_functions_and_reads_the_reasons(tmp_path: Path) -> None:
    body = [f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES)]  # with the def: one too many
    many = ", ".join(f"p{i}" for i in range(MAX_PARAMETERS + 1))
    enough = ", ".join(f"p{i}" for i in range(MAX_PARAMETERS))
    source = [
        "def long():", *body,
        f"def wide(self, {many}):", "    pass",
        f"def fine(cls, {enough}):", *body[1:],
        f'def said(*a, {enough}, **k):', f'    """{FUNCTION_LONG_MARK} a table.', "",
        f'    {MANY_PARAMETERS_MARK} options."""', *body,
        f"def empty_reason({many}):", f'    """{MANY_PARAMETERS_MARK}  """',
    ]
    (tmp_path / "m.py").write_text("\n".join(source) + "\n")

    def at(name: str) -> int:
        return next(n for n, line in enumerate(source, 1) if line.startswith(f"def {name}("))

    assert _unjustified_functions(tmp_path / "m.py") == [
        f"m.py:1 long: {MAX_FUNCTION_LINES + 1} lines",
        f"m.py:{at('wide')} wide: {MAX_PARAMETERS + 1} parameters",
        f"m.py:{at('empty_reason')} empty_reason: {MAX_PARAMETERS + 1} parameters"]


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
