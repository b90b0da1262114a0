"""``fleetwatch slo report --html`` (the status page from Prometheus, one file) and the
report's table at 80 columns.

Prometheus is a test double (:class:`tests.support.page_helpers.PrometheusDouble`) answering
with what a real SLO engine exported after a replay of simulated vLLM captures, so the
file can be checked against the engine's own ``/slo`` rows.
"""

from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from fleetwatch.cli import main
from fleetwatch.commands.slo_report import render_table
from fleetwatch.page.model import number
from fleetwatch.slo.outputs.report import ReportRow
from tests.support.helpers import SLOReplay
from tests.support.page_helpers import EVIL, SLOS, PrometheusDouble, VLLMSim, parse_dom

INSTANCE = "sidecar-a:9810"


def replayed_engine() -> SLOReplay:
    """The engine after 30 simulated 5-second scrapes of two models (one hostile)."""
    replay = SLOReplay(SLOS)
    sim = VLLMSim(["tiny-llm", EVIL])
    for i in range(30):
        replay.feed(1_700_000_000.0 + 5 * i, sim.exposition())
    return replay


def exported(replay: SLOReplay) -> list[tuple[str, dict[str, str], float]]:
    """What Prometheus would hold from the sidecar: the engine's series with the
    instance label, the sidecar's upstream health and model info."""
    out = [(n, {**lab, "instance": INSTANCE}, v) for n, lab, v in replay.engine.iter_metrics()]
    out += [("fleetwatch_upstream_up", {"target": "vllm", "instance": INSTANCE}, 1.0),
            ("fleetwatch_upstream_model_ready",
             {"target": "vllm", "model": EVIL, "instance": INSTANCE}, 0.0)]
    for model, team in (("tiny-llm", "genai"), (EVIL, "<img src=x onerror=alert(2)>")):
        out.append(("modelserver_model_info", {
            "model": model, "model_version": "", "backend": "vllm", "runtime": "vllm",
            "team": team, "owner": "bob", "oncall": "genai-oncall", "latency_tier": "batch",
            "engine_version": "0.32.0", "quantization": "", "instance": INSTANCE}, 1.0))
    return out


def test_report_html_is_the_page_of_what_prometheus_holds(tmp_path: Path) -> None:
    replay = replayed_engine()
    out = tmp_path / "fleet.html"
    with PrometheusDouble(exported(replay)) as prom:
        res = CliRunner().invoke(main, ["slo", "report", "--prometheus", prom.url,
                                        "--html", str(out), "--json"])
    assert res.exit_code == 0, res.output
    html = out.read_text(encoding="utf-8")
    doc = parse_dom(html)
    for sid in ("targets", "models", "slos", "autoscaling", "links"):
        assert doc.iter("section", id=sid), sid
    assert not doc.iter("script") and not doc.iter("img")
    assert "http" not in "".join(a.attrs.get("src", "") for a in doc.iter())  # no assets
    for row in replay.status():
        card = doc.iter("article", class_="slo", data_slo=row["slo"], data_model=row["model"])
        assert len(card) == 1, row["slo"]
        assert card[0].attrs["data-state"] == row["state"]
        budget = card[0].iter(class_="budget")[0]
        assert budget.text() == number(row["error_budget_remaining"], pct=True)
        assert INSTANCE in card[0].text()
        for window, per_band in row["burn_rates"].items():
            for band in row["events"]:  # the engine exports the bands that had events
                cell = card[0].iter("g", data_band=band, data_window=window)[0]
                burn = per_band[band]
                assert cell.attrs["data-burn"] == ("" if burn is None else str(burn))
    overload = doc.iter("article", class_="slo", data_slo="ttft", data_model="tiny-llm")[0]
    assert "bands burning faster than 1 over 1h: 8, 16" in overload.text()
    for obj in replay.engine.autoscaling():
        sig = doc.iter("article", class_="signal", data_model=obj["model"])
        assert len(sig) == 1 and float(sig[0].attrs["data-signal"]) == obj["signal"]
        assert obj["state"] in sig[0].text()
    targets = doc.iter("section", id="targets")[0].text()
    assert f"{INSTANCE} / vllm" in targets and "not ready" in targets
    models = doc.iter("section", id="models")[0].text()
    assert EVIL in models and "<img src=x onerror=alert(2)>" in models


def test_report_html_names_an_unwritable_file(tmp_path: Path) -> None:
    with PrometheusDouble(exported(replayed_engine())) as prom:
        res = CliRunner().invoke(main, ["slo", "report", "--prometheus", prom.url,
                                        "--html", str(tmp_path / "no" / "such.html")])
    assert res.exit_code == 1
    assert "--html" in res.output and "cannot write" in res.output


def _report() -> list[ReportRow]:
    burns = {w: {"all": 2.5, "8": 0.5, "16": 14.0} for w in ("5m", "30m", "1h", "6h")}
    return [{"slo": "llm-ttft-interactive", "model": f"llama-3.1-70b-instruct-awq-{i}",
             "model_version": "1", "backend": "vllm", "instance": "10.0.3.17:9810",
             "state": "overload", "budget_remaining": 0.42, "capacity": 8.0,
             "concurrency": 11.3, "burn_rates": burns} for i in range(2)]


def _table_text(width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    render_table(_report(), console)
    return console.export_text()


def test_report_table_reads_at_80_columns() -> None:
    text = _table_text(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    lines = text.splitlines()
    header = next(line for line in lines if " model " in line)
    start, end = header.index(" model "), header.index(" state ")
    column = "".join(line[start:end].strip() for line in lines[lines.index(header) + 2:])
    assert "llama-3.1-70b-instruct-awq-0llama-3.1-70b-instruct-awq-1" in column  # folded
    for cell in ("overload", "42.0%", "2.5", "16"):
        assert cell in text
    assert "not shown at 80 columns: version, instance, concurrency" in " ".join(text.split())


def test_an_empty_report_is_a_table_saying_there_is_no_slo_yet() -> None:
    for width in (80, 250):  # a fresh Prometheus: no fleetwatch_slo_* series
        console = Console(width=width, file=io.StringIO(), record=True)
        render_table([], console)
        text = " ".join(console.export_text().split())
        assert "fleetwatch SLOs" in text and "no SLO in Prometheus yet" in text


def test_report_table_is_whole_when_wide() -> None:
    text = _table_text(220)
    assert "not shown" not in text and "…" not in text
    assert "llama-3.1-70b-instruct-awq-1" in text and "10.0.3.17:9810" in text


def test_report_table_writes_large_numbers_in_digits() -> None:
    """A burn rate of 1440 (a 14.4x threshold's hundredfold) read ``1.44e+03`` in the
    table and on the page; a number above 10^6 keeps its exponent; ``--json`` keeps every
    digit (the table only formats)."""
    row = {**_report()[0], "capacity": 1234.5, "budget_remaining": -29.17,
           "burn_rates": {"1h": {"all": 1440.0, "8": 2.5e7}}}
    console = Console(width=250, file=io.StringIO(), record=True)
    render_table([row], console)
    text = console.export_text()
    assert "1440" in text and "1234" in text and "-2917.0%" in text, text
    assert "e+03" not in text, text
    assert number(1440.0) == "1440" and number(999.7) == "1000" and number(99.97) == "100"
    assert number(2.5e7) == "2.5e+07" and number(0.5) == "0.5" and number(None) == "-"
