"""What importing the generators and the SLO building blocks pulls in, checked in a fresh
interpreter (a module already imported by another test would hide a regression), and the
shape of ``fleetwatch.slo``: the engine never parses exposition text, no module is huge."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SLO_DIR = Path(__file__).resolve().parents[2] / "src" / "fleetwatch" / "slo"
HEAVY = ("numpy", "aiohttp", "fleetwatch.slo.engine", "fleetwatch.sidecar",
         "fleetwatch.exporters.scraper")


def _loaded_after(*modules: str) -> set[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {list(modules)!r}:\n"
            "    importlib.import_module(m)\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    return set(json.loads(out.stdout))


def test_generators_import_no_numpy_aiohttp_engine_or_scraper():
    loaded = _loaded_after("fleetwatch.alerts.generate", "fleetwatch.dashboards")
    assert "fleetwatch.alerts.generate" in loaded and "fleetwatch.dashboards" in loaded
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []


@pytest.mark.parametrize("module", ["fleetwatch.slo.spec", "fleetwatch.slo.bands",
                                    "fleetwatch.slo.durations", "fleetwatch.slo.sli"])
def test_what_generators_import_from_slo_stays_light(module):
    loaded = _loaded_after(module)
    assert module in loaded
    assert not {"numpy", "fleetwatch.slo.engine", "fleetwatch.slo.account.windows"} & loaded


def _imports(path: Path) -> set[str]:
    """Modules a file imports at run time (``if TYPE_CHECKING:`` blocks excluded)."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_engine_never_parses_exposition_text():
    for path in sorted(SLO_DIR.rglob("*.py")):
        imported = _imports(path)
        assert "fleetwatch.exporters.parser" not in imported, path.name
        assert not any(m.startswith(("fleetwatch.sidecar", "fleetwatch.exporters.server",
                                     "fleetwatch.exporters.scraper", "fleetwatch.cli",
                                     "fleetwatch.commands", "click", "urllib", "http"))
                       for m in imported), (path.name, sorted(imported))


def test_one_latency_sli_list_derived_from_the_schema():
    from typing import get_args

    from fleetwatch.alerts import recording
    from fleetwatch.labels.schema import METRICS_BY_NAME
    from fleetwatch.slo import sli, spec

    assert sli.LATENCY_HISTOGRAMS == (
        "modelserver_request_duration_seconds", "modelserver_queue_duration_seconds",
        "modelserver_time_to_first_token_seconds", "modelserver_inter_token_latency_seconds",
        "modelserver_time_per_output_token_seconds")
    for fam in sli.LATENCY_HISTOGRAMS:
        m = METRICS_BY_NAME[fam]
        assert (m.type, m.unit, m.labels) == ("histogram", "seconds", ())
    assert recording.LATENCY_HISTOGRAMS is sli.LATENCY_HISTOGRAMS
    assert spec.LATENCY_METRICS is sli.LATENCY_METRICS
    assert spec.SUMMARY_METRICS is sli.SUMMARY_METRICS
    assert sorted(sli.LATENCY_METRICS.values()) == sorted(sli.LATENCY_HISTOGRAMS)
    assert sli.SUMMARY_METRICS == {
        "request": "modelserver_request_duration_summary_seconds",
        "queue": "modelserver_queue_duration_summary_seconds"}
    # the SLO file's vocabulary (pydantic Literals) is exactly what sli derives
    latency = get_args(spec.LatencySLI.model_fields["metric"].annotation)
    timeslice = get_args(spec.TimesliceSLI.model_fields["metric"].annotation)
    assert set(latency) == set(sli.LATENCY_METRICS)
    assert set(timeslice) == set(sli.SUMMARY_METRICS)


#: The engine's stages in order (fleetwatch/slo/__init__.py): a stage imports only the
#: stages before it and the shared modules at the package's top.
STAGES = ["decode", "account", "judge", "capacity", "outputs"]


def test_each_stage_imports_only_the_stages_before_it():
    top = {p.stem for p in SLO_DIR.glob("*.py")} - {"__init__", "engine"}
    for k, stage in enumerate(STAGES):
        for path in sorted((SLO_DIR / stage).glob("*.py")):
            for name in _imports(path):
                if not name.startswith("fleetwatch.slo."):
                    continue
                first = name.split(".")[2]
                assert first in top or first in STAGES[:k + 1], (path, name)
    for shared in sorted(top):  # the shared modules import no stage and not the engine
        for name in _imports(SLO_DIR / f"{shared}.py"):
            if name.startswith("fleetwatch.slo."):
                assert name.split(".")[2] in top, (shared, name)
