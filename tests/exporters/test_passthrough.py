"""Pass-through never copies what a Prometheus would reject.

With ``passthrough_unmapped: true`` (``normalize --passthrough``) every upstream line of
an unmapped family is re-validated: a value that is not a number, a sample name that does
not belong to its family's declared type, a HELP with an escape the format lacks are left
out (counted as refused samples), so a real Prometheus keeps the scrape — and every other
series of it.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support.hostile import cli, promtool_errors

GARBAGE = (
    "# HELP custom_gauge A help with a bad \\q escape\n"
    "# TYPE custom_gauge gauge\n"
    'custom_gauge{a="b"} 1\n'
    'custom_gauge{a="c"} line\n'
    'custom_gauge{a="d"} 0x1F\n'
    'custom_gauge{a="e"} \u0661\n'  # an Arabic-Indic digit: Python's float reads it
    "# TYPE custom_counter counter\n"
    'custom_counter_bucket{le="1"} 3\n'
    "custom_counter_total 4\n"
    'nv_inference_count{model="m",version="1"} 3\n'
)


def test_normalize_passthrough_output_parses_everywhere(tmp_path):
    f = tmp_path / "body.prom"
    f.write_text(GARBAGE)
    res = cli("normalize", "--passthrough", "--source", "triton", str(f))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert 'custom_gauge{a="b"} 1' in out and "custom_counter_total 4" in out
    for bad in ("line", "0x1F", "\u0661", "custom_counter_bucket", "\\q"):
        assert bad not in out, (bad, out)
    assert promtool_errors(out) == []
    list(text_string_to_metric_families(out))
    assert "bad_value" in res.stderr and "type_mismatch" in res.stderr
