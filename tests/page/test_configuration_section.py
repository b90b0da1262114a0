"""The status page's configuration section: drifts and lint findings, as text."""

from __future__ import annotations

from fleetwatch.page.render import configuration_section


def test_no_rows_no_section():
    assert configuration_section([]) == ""


def test_rows_are_escaped_and_errors_marked():
    html = configuration_section([
        {"model": "<b>ranker</b>", "kind": "drift", "what": "model_version",
         "severity": "error", "detail": "declared '2', running '1,2'"},
        {"model": "streamer", "kind": "lint", "what": "decoupled_no_first_response_histogram",
         "severity": "warning", "detail": "start tritonserver with --metrics-config"}])
    assert html.startswith('<section id="configuration"><h2>Configuration</h2>')
    assert "&lt;b&gt;ranker&lt;/b&gt;" in html and "<b>ranker" not in html
    assert '<span class="no">error</span>' in html
    assert "declared &#x27;2&#x27;, running &#x27;1,2&#x27;" in html
    assert html.count("<tr>") == 3  # the head and two rows
