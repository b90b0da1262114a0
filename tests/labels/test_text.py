"""Label sets written in the text format (labels/text.py)."""

from __future__ import annotations

from fleetwatch.labels.text import append_labels, append_rendered, render_labels


def test_appending_to_an_empty_or_a_rendered_label_set() -> None:
    assert append_rendered("", 'le="+Inf"') == '{le="+Inf"}'
    assert append_rendered('{model="m"}', 'le="+Inf"') == '{model="m",le="+Inf"}'
    assert append_labels('{model="m"}', ()) == '{model="m"}'
    assert append_labels("", (("quantile", "0.5"),)) == '{quantile="0.5"}'
    pairs = (("model", 'a"b'), ("le", "1.0"))
    assert append_labels(render_labels(pairs[:1]), pairs[1:]) == render_labels(pairs)
