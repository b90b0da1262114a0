"""Label sets in the Prometheus text format: escaping and rendering (the one place that
writes ``{a="b",…}``; the parser in :mod:`fleetwatch.exporters.parser` reads it back)."""

from __future__ import annotations

LabelPairs = tuple[tuple[str, str], ...]


def escape_label_value(value: str) -> str:
    """Escape a label value for the text format (backslash, double quote, newline)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def render_labels(pairs: LabelPairs) -> str:
    """Render label pairs as ``{a="b",…}``, or ``""`` when there are none."""
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs) + "}"


def append_rendered(rendered: str, more: str) -> str:
    """Append rendered label pairs (``a="b",…`` without braces) to a rendered label set
    (``{…}`` or ``""``)."""
    return rendered[:-1] + "," + more + "}" if rendered else "{" + more + "}"


def append_labels(rendered: str, tail: LabelPairs) -> str:
    """Append label pairs to an already rendered label set (``{…}`` or ``""``)."""
    if not tail:
        return rendered
    return append_rendered(rendered, render_labels(tail)[1:-1])
