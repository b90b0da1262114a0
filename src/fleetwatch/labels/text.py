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
