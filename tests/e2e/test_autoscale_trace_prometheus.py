"""``fleetwatch autoscale trace``: arrivals read back from a real Prometheus (Debian's
``prometheus``, its TSDB backfilled by ``promtool tsdb create-blocks-from openmetrics``
with the schema's counters of a known traffic shape), written as mooncake JSONL that
``autoscale replay`` reads."""

from __future__ import annotations

import io
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetwatch.autoscale.trace import read_mooncake_jsonl
from fleetwatch.cli import main
from tests.support.helpers import PrometheusProcess

SCRAPE = 15  # seconds between backfilled samples
#: Requests per second by minute of the 30 recorded: 1/s, a 5-minute burst of 5/s, 1/s.
RATES = [1.0] * 10 + [5.0] * 5 + [1.0] * 15
INPUT, OUTPUT = 100, 20  # tokens per request
#: Whole minutes, two hours back (inside Prometheus' retention, outside its head block).
T0 = (int(time.time()) // 3600 - 2) * 3600


def openmetrics() -> str:
    """Counters of model ``llama`` (the shape above) and of ``other`` (never read)."""
    series: dict[str, list[str]] = {}
    for model, scale in (("llama", 1.0), ("other", 7.0)):
        reqs = 0.0
        for i in range(len(RATES) * 60 // SCRAPE + 1):
            t = T0 + i * SCRAPE
            for name, labels, value in (
                    ("modelserver_requests_total", "", reqs),
                    ("modelserver_tokens_total", ',token_type="input"', reqs * INPUT),
                    ("modelserver_tokens_total", ',token_type="output"', reqs * OUTPUT)):
                key = f'{name}{{model="{model}"{labels}}}'
                series.setdefault(key, []).append(f"{key} {value:g} {t}")
            if i < len(RATES) * 60 // SCRAPE:
                reqs += RATES[i * SCRAPE // 60] * SCRAPE * scale
    out = []
    for family in ("modelserver_requests", "modelserver_tokens"):
        out.append(f"# TYPE {family} counter")
        for key, lines in series.items():
            if key.startswith(family + "_total{"):
                out.extend(lines)
    return "\n".join(out) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    prom = PrometheusProcess([])
    src = tmp_path_factory.mktemp("backfill") / "counters.om"
    src.write_text(openmetrics())
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(src),
                    str(prom.dir / "data")], check=True, capture_output=True, timeout=120)
    with prom:
        yield prom


def trace(prom: PrometheusProcess, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["autoscale", "trace", "--prometheus", prom.url,
                                    "--end", str(T0 + len(RATES) * 60), "--since", "30m",
                                    *args])
    return res.exit_code, res.output


def test_the_trace_has_the_recorded_rate_burst_and_token_mix(prometheus) -> None:
    code, out = trace(prometheus, "--model", "llama", "--step", "60s")
    assert code == 0, out
    requests = read_mooncake_jsonl(io.StringIO(out))
    recorded = sum(r * 60 for r in RATES)
    assert abs(len(requests) - recorded) <= 0.02 * recorded, (len(requests), recorded)
    per_minute = [0] * len(RATES)
    for r in requests:
        per_minute[min(len(RATES) - 1, int(r.arrival // 60))] += 1
    burst = per_minute[10:15]
    calm = per_minute[:9] + per_minute[16:]
    assert min(burst) > 4 * max(calm), per_minute  # the burst is where it was
    assert {r.input_tokens for r in requests} == {INPUT}
    assert {r.output_tokens for r in requests} == {OUTPUT}
    stamps = [json.loads(line)["timestamp"] for line in out.splitlines()]
    assert stamps == sorted(stamps)  # written in time order, as aiperf's schedule reads it


def test_a_finer_step_keeps_the_total(prometheus) -> None:
    coarse = read_mooncake_jsonl(io.StringIO(trace(prometheus, "--model", "llama")[1]))
    fine = read_mooncake_jsonl(io.StringIO(
        trace(prometheus, "--model", "llama", "--step", "30s")[1]))
    assert abs(len(fine) - len(coarse)) <= 0.03 * len(coarse)


def test_a_model_prometheus_never_saw_is_one_error_line(prometheus) -> None:
    code, out = trace(prometheus, "--model", "nobody")
    assert code == 1
    assert out.strip().splitlines() == [
        f"fleetwatch: error: Prometheus at {prometheus.url} has no finished request of model "
        f"'nobody' (modelserver_requests_total) in the 30m before {T0 + len(RATES) * 60}"]


def test_unreachable_prometheus_and_bad_durations_are_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["autoscale", "trace", "--prometheus",
                                    "http://127.0.0.1:9", "--model", "llama"])
    assert res.exit_code == 1
    assert res.output.startswith("fleetwatch: error: cannot query Prometheus at "), res.output
    assert len(res.output.strip().splitlines()) == 1
    res = CliRunner().invoke(main, ["autoscale", "trace", "--prometheus", "http://x",
                                    "--model", "llama", "--step", "1 minute"])
    assert res.exit_code == 2
    assert "--step '1 minute': give a duration such as 90s" in res.output
