"""Pass-through never copies what a Prometheus would reject.

With ``passthrough_unmapped: true`` (``normalize --passthrough``) every upstream line of
an unmapped family is re-validated: a value that is not a number, a sample name that does
not belong to its family's declared type, a HELP with an escape the format lacks are left
out (counted as refused samples), so a real Prometheus keeps the scrape — and every other
series of it.
"""

from __future__ import annotations

import pytest
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


#: OpenMetrics bodies (valid: prometheus_client's OpenMetrics parser reads each) with the
#: family types only OpenMetrics has, each beside a Triton family the table maps.
OPENMETRICS_ONLY = {
    "info": ('# HELP build Build facts.\n# TYPE build info\n'
             'build_info{version="1.2",revision="abc"} 1\n'),
    "stateset": ('# TYPE feature stateset\nfeature{feature="a"} 1\nfeature{feature="b"} 0\n'
                 'feature{feature="c",shard="1"} 1\n'),
    "gaugehistogram": ('# TYPE queue_age gaugehistogram\n'
                       'queue_age_bucket{le="0.5"} 2\nqueue_age_bucket{le="+Inf"} 5\n'
                       'queue_age_gcount 5\nqueue_age_gsum 3.5\n'),
    "unknown": '# TYPE widgets unknown\nwidgets{kind="x"} 7\n',
}


def _om_samples(body: str) -> set[tuple[str, tuple, float]]:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om

    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for fam in om(body) for s in fam.samples}


@pytest.mark.parametrize("kind", sorted(OPENMETRICS_ONLY))
def test_openmetrics_only_types_pass_through_as_text_format_types(tmp_path, kind):
    """An OpenMetrics-only family comes out of ``normalize --passthrough`` in a form the
    text format's parsers accept (promtool, prometheus_client's text parser), with every
    sample OpenMetrics' own parser reads in the input, value for value, and no TYPE the
    text format lacks."""
    from prometheus_client.parser import text_string_to_metric_families as text_parser

    body = OPENMETRICS_ONLY[kind] + 'nv_inference_count{model="m",version="1"} 3\n# EOF\n'
    want = _om_samples(body)
    assert want  # the input is valid OpenMetrics
    f = tmp_path / "body.prom"
    f.write_text(body)
    res = cli("normalize", "--passthrough", "--source", "triton", str(f))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert promtool_errors(out) == []
    types = {m.split()[3] for m in out.splitlines() if m.startswith("# TYPE ")}
    assert types <= {"counter", "gauge", "histogram", "summary", "untyped"}, types
    got = {(s.name, tuple(sorted(s.labels.items())), s.value)
           for fam in text_parser(out) for s in fam.samples}
    assert want - {s for s in want if s[0] == "nv_inference_count"} <= got
