"""SOAK (60 s, marked ``soak``): the CI version of ``./dev soak`` (tools/soak.py).

Churn, bad values and concurrent scrapers for 60 seconds against a real ``fleetwatch
serve``; asserts on counts — no request refused, RSS flat over the last third, file
descriptors flat, the log not flooded — never on latencies (the machine is shared).
Deselect with ``-m 'not soak'``.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _soak_tool():
    spec = importlib.util.spec_from_file_location("fleetwatch_soak", ROOT / "tools" / "soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fleetwatch_soak"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.soak
def test_soak_60_seconds(tmp_path, monkeypatch):
    soak = _soak_tool()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the soak's folder goes there
    out = tmp_path / "soak.json"
    rc = soak.main(["--duration", "60", "--report", "5", "--scrapers", "4", "--pause", "0.2",
                    "--forget", "10", "--max-models", "400", "--json", str(out)])
    import json

    result = json.loads(out.read_text())
    assert rc == 0 and result["refused"] == 0, result["errors"]
    assert result["ok"] > 100
    assert result["upstream_scrapes"] > 30
    # memory is flat once the engine forgets models: < 10 MB over the last 20 s
    assert result["rss_growth_last_third_mb"] < 10, result["rows"]
    assert result["fds_max"] <= result["fds_first"] + 10, result["rows"]
    # one line per change of problem: never the same problem again while nothing changed
    # (a count of lines against scrapes would depend on how many problems the machine's
    # speed adds: a slow scrape is a change too), and never one line per request
    assert result["repeated_log_lines"] == 0, result["log"]
    assert result["log_lines"] < result["ok"], result["log"]  # one per request would not be
