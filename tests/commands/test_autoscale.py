"""``fleetwatch autoscale replay`` on the bundled Azure trace and the real-vLLM sweep, and
on bad input (exit 2 naming the file)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from fleetwatch.autoscale.policies import POLICIES
from fleetwatch.autoscale.trace import read_azure_csv, segment, write_mooncake_jsonl
from fleetwatch.cli import main
from tests.support.helpers import ROOT

TRACE = ROOT / "tests" / "data" / "workloads" / "AzureLLMInferenceTrace_code.csv"
SWEEP = ROOT / "tests" / "data" / "vllm-sweep" / "captures"
SLOS = ROOT / "src" / "fleetwatch" / "demo" / "slos.yaml"
BASE = ["autoscale", "replay", "--slos", str(SLOS), "--captures", str(SWEEP)]


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, [*BASE, *args])
    return res.exit_code, res.output


def test_json_has_every_policy_on_the_segment() -> None:
    code, out = run(str(TRACE), "--segment", "2460:600", "--itl-seconds", "0.05", "--json")
    assert code == 0, out
    doc = json.loads(out)
    with TRACE.open(encoding="utf-8") as f:
        expected = len(segment(read_azure_csv(f), 2460.0, 600.0))
    assert doc["requests"] == expected
    assert doc["span_seconds"] == 60.0  # 600 trace seconds at the default compression 10
    assert [r["policy"] for r in doc["results"]] == [p.name for p in POLICIES]
    static = doc["results"][-1]
    assert static["cost_ratio"] == 1.0 and static["scale_events"] == 0
    assert {p["replicas"] for p in static["timeline"]} == {doc["static_replicas"]}
    assert set(static["timeline"][0]) == {"time", "replicas", "ready"}


def test_table_and_policy_choice_on_a_mooncake_trace(tmp_path: Path) -> None:
    with TRACE.open(encoding="utf-8") as f:
        reqs = segment(read_azure_csv(f), 2460.0, 300.0)
    jsonl = tmp_path / "trace.jsonl"
    jsonl.write_text(write_mooncake_jsonl(reqs), encoding="utf-8")
    code, out = run(str(jsonl), "--policy", "fleetwatch", "--policy", "wva")
    assert code == 0, out
    assert f"{len(reqs)} requests" in out
    assert "fleetwatch" in out and "wva" in out and "production-stack" not in out
    # blank lines before the first record (read_mooncake_jsonl skips them): still JSONL
    jsonl.write_text("\n\n" + write_mooncake_jsonl(reqs), encoding="utf-8")
    code, out = run(str(jsonl), "--policy", "fleetwatch")
    assert code == 0 and f"{len(reqs)} requests" in out, out


def test_a_trace_shorter_than_a_decision_keeps_its_figures(tmp_path: Path) -> None:
    """Four requests within 0.14 trace seconds: no decision is taken, yet the fleet ran
    on its initial replica, and the table says so (replica-seconds not rounded to 0, peak
    1), in 80 columns."""
    lines = TRACE.read_text(encoding="utf-8").splitlines()[:5]  # the header and 4 rows
    short = tmp_path / "short.csv"
    short.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = run(str(short), "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert all(r["peak_replicas"] == 1 and r["replica_seconds"] > 0 for r in doc["results"])
    code, out = run(str(short))
    assert code == 0, out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in {p.name for p in POLICIES}}
    assert set(rows) == {p.name for p in POLICIES}
    rs = doc["results"][0]["replica_seconds"]
    assert all(row[3] == f"{rs:.3g}" and row[-1] == "1" for row in rows.values()), out
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_help_shows_the_worked_example() -> None:
    res = CliRunner().invoke(main, ["autoscale", "replay", "--help"])
    assert res.exit_code == 0
    assert "AzureLLMInferenceTrace_code.csv" in res.output and "--captures" in res.output
    assert "Many parameters" not in res.output  # the docstring's note for developers


def test_the_hints_name_options_that_exist(tmp_path: Path) -> None:
    # a tier selector without --registry judges no model: the hint is --registry
    res = CliRunner().invoke(main, ["autoscale", "replay", str(TRACE), "--slos",
                                    str(ROOT / "examples" / "slos.yaml"), "--captures",
                                    str(SWEEP), "--segment", "0:60"])
    assert res.exit_code == 2 and "needs --registry" in res.output, res.output
    # captures without a time in their names: --interval, which the command has
    for i, src in enumerate(sorted(SWEEP.glob("*.prom"))[:3]):
        (tmp_path / f"c{i}.prom").write_text(src.read_text(encoding="utf-8"))
    code, out = run(str(TRACE), "--segment", "0:60", "--captures", str(tmp_path))
    assert code == 2 and "give --interval SECONDS" in out, out
    code, out = run(str(TRACE), "--segment", "0:60", "--captures", str(tmp_path),
                    "--interval", "2")
    assert "No such option" not in out and "--interval" not in out, out


def test_bad_input_exits_2_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,x,1\n",
                   encoding="utf-8")
    code, out = run(str(bad))
    assert code == 2 and f"{bad}: line 2: ContextTokens" in out
    code, out = run(str(TRACE), "--segment", "10")
    assert code == 2 and "--segment" in out
    code, out = run(str(tmp_path / "missing.csv"))
    assert code == 2 and "cannot read" in out
    code, out = run(str(TRACE), "--segment", "100000:60")
    assert code == 2 and "no request" in out


def test_a_csv_without_a_column_and_missing_captures_are_said_as_such(tmp_path: Path) -> None:
    short = tmp_path / "short.csv"
    short.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.9,10\n", encoding="utf-8")
    code, out = run(str(short))
    assert code == 2 and f"{short}: line 1: header" in out
    assert "TIMESTAMP,ContextTokens,GeneratedTokens" in out and "JSON" not in out
    res = CliRunner().invoke(main, ["autoscale", "replay", "--slos", str(SLOS), "--captures",
                                    str(tmp_path / "nowhere"), str(TRACE)])
    assert res.exit_code == 2
    assert f"--captures {tmp_path / 'nowhere'}: no such file or directory" in res.output


def test_a_model_not_in_the_captures_is_blamed_on_model() -> None:
    code, out = run(str(TRACE), "--segment", "0:60", "--model", "nosuch")
    assert code == 2
    assert out.strip() == ("fleetwatch: error: --model nosuch: no SLO judged a model of that "
                           "name in the captures (the SLOs judged tiny-llm)"), out


def test_an_empty_file_and_a_json_array_are_said_as_such(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    code, out = run(str(empty))
    assert code == 2 and out.strip() == (
        f"fleetwatch: error: {empty}: empty: neither an Azure trace CSV (header "
        "TIMESTAMP,ContextTokens,GeneratedTokens) nor a mooncake JSONL"), out
    array = tmp_path / "trace.json"
    array.write_text('[{"timestamp": 0, "input_length": 1, "output_length": 1}]\n',
                     encoding="utf-8")
    code, out = run(str(array))
    assert code == 2 and out.strip() == (
        f"fleetwatch: error: {array}: line 1: a JSON array; a mooncake trace is JSONL, one "
        "object per line"), out
