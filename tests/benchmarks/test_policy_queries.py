"""Every PromQL query the live scaler sends (benchmarks/autoscale/scaler.py): each
policy's own queries and the scaler's per-pod sample queries parse as PromQL (promtool,
as a recording rule), so a policy cannot reach Prometheus only to be refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from benchmarks.autoscale.fleet import MODEL
from benchmarks.autoscale.scaler import SAMPLE_QUERIES, controller_metric

from fleetwatch.autoscale.policies import POLICIES
from tests.support.helpers import tool

QUERIES = sorted({(p.name, key, q) for p in POLICIES for key, q in p.queries(MODEL).items()
                  if controller_metric(q) is None}
                 | {("scaler", key, q) for key, q in SAMPLE_QUERIES.items()})


@pytest.mark.parametrize(("owner", "key", "query"), QUERIES,
                         ids=[f"{o}-{k}" for o, k, _ in QUERIES])
def test_query_is_promql(owner: str, key: str, query: str, tmp_path: Path) -> None:
    rules = {"groups": [{"name": "q", "rules": [{"record": "q:check", "expr": query}]}]}
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    done = subprocess.run([tool("promtool"), "check", "rules", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{owner} {key}: {query}\n{done.stdout}{done.stderr}"
