"""Answers of a real Prometheus are checked: ``fleetwatch compare`` and ``fleetwatch
baseline record`` against a real ``prometheus`` (Debian's) scraping a test double of a
sidecar whose per-band SLO counters hold values no sidecar writes — negative, NaN, +Inf,
1e308. Each is one error line naming the query and the series, exit 1 (Prometheus
answered something the comparison cannot use), never a pydantic traceback, never
``-300/-100`` or ``inf%`` with exit 0. The same exporter with sane values compares
normally, so the refusals are the bad values', not the harness's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.support.helpers import PrometheusProcess, wait_until
from tests.support.hostile import Upstream, cli

LABELS = 'slo="lat",model="m",backend="triton",band="1"'


def _exposition(good: dict[str, str], total: dict[str, str]) -> str:
    """A test double's ``/metrics``: the sidecar's per-band counters of versions 1 and 2
    of model ``m`` (values as text, so ``NaN`` and ``+Inf`` are written as such)."""
    lines = ["# TYPE fleetwatch_slo_events_total counter",
             "# TYPE fleetwatch_slo_good_events_total counter"]
    for v in ("1", "2"):
        lines.append(f'fleetwatch_slo_events_total{{{LABELS},model_version="{v}"}} {total[v]}')
        lines.append(f'fleetwatch_slo_good_events_total{{{LABELS},model_version="{v}"}} '
                     f"{good[v]}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _served(body: str) -> Iterator[PrometheusProcess]:
    """A real Prometheus scraping a test double that serves ``body``, once it holds both
    versions' counters."""
    with Upstream(lambda _n: body) as up, PrometheusProcess([f"127.0.0.1:{up.port}"]) as prom:
        wait_until(lambda: len(prom.query("fleetwatch_slo_events_total")) == 2,
                   "Prometheus to hold both versions' counters", 60)
        yield prom


def _compare(url: str):  # type: ignore[no-untyped-def]
    return cli("compare", "--prometheus", url, "--model", "m", "--baseline-version", "1",
               "--candidate-version", "2", timeout=60)


def _record(url: str, out: str):  # type: ignore[no-untyped-def]
    return cli("baseline", "record", "--prometheus", url, "--model", "m", "--version", "1",
               "--out", out, timeout=60)


@pytest.mark.parametrize("good,total,says", [
    ({"1": "-100", "2": "-300"}, {"1": "-100", "2": "-300"},
     ("not an event count", 'band="1"', "= -")),
    ({"1": "90", "2": "1e308"}, {"1": "100", "2": "1e308"},
     ("not an event count", 'band="1"', 'model_version="2"', "= 1e+308")),
    ({"1": "90", "2": "NaN"}, {"1": "100", "2": "NaN"},
     ("not an event count", 'band="1"', 'model_version="2"', "= NaN")),
    ({"1": "90", "2": "90"}, {"1": "100", "2": "+Inf"},
     ("not an event count", 'band="1"', 'model_version="2"', "= +Inf")),
    ({"1": "90", "2": "900"}, {"1": "100", "2": "100"},
     ("more good events than events", "band='1'", "model_version='2'", "900 good events of 100")),
], ids=["negative", "1e308", "nan", "inf", "good-above-total"])
def test_bad_counts_in_a_prometheus_answer_are_refused(tmp_path, good, total, says):
    """Before, -300/-100 printed as a comparison and 1e308 as ``inf%`` with exit 0,
    ``baseline record`` ended in a pydantic traceback, and 900 good of 100 events read as
    100/100."""
    with _served(_exposition(good, total)) as prom:
        for res in (_compare(prom.url), _record(prom.url, str(tmp_path / "b.yaml"))):
            assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
            assert "Traceback" not in res.stderr and "ValidationError" not in res.stderr
            assert res.stdout == ""
            line = res.stderr.strip()
            assert len(line.splitlines()) == 1, line
            assert f"Prometheus at {prom.url} answered" in line
            assert "fleetwatch_slo_" in line  # the query
            for s in says:  # why, and the series
                assert s in line, (s, line)
        assert not (tmp_path / "b.yaml").exists()


def test_sane_counts_from_the_same_exporter_compare_and_record(tmp_path):
    """The control: the same double with counts a sidecar could write (and ``baseline
    record`` says "1 SLO, 1 band", not "1 SLOs, 1 bands")."""
    with _served(_exposition({"1": "990", "2": "700"}, {"1": "1000", "2": "1000"})) as prom:
        res = _compare(prom.url)
        assert res.returncode == 0, res.stderr
        assert "worse" in res.stdout and "inf" not in res.stdout.lower()
        res = _record(prom.url, str(tmp_path / "b.yaml"))
        assert res.returncode == 0, res.stderr
        assert "(triton), 1 SLO, 1 band" in res.stderr, res.stderr  # singular for one
        assert "total: 1000" in (tmp_path / "b.yaml").read_text()
