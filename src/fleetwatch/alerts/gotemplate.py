"""A Go-template evaluator for the subset of Prometheus alert templates the generator writes.

The behaviour tests (:mod:`fleetwatch.alerts.behaviour`) render each rule's own labels and
annotations with it to get the alerts promtool must see, so a template that Prometheus
renders differently fails those tests. :func:`render_template` is the one entry point.
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["render_template"]

#: An action: ``{{`` … ``}}``, where a string literal may hold ``}}``.
_ACTION = re.compile(r'{{((?:[^"}]|"(?:[^"\\]|\\.)*"|}(?!}))*)}}', re.S)


def _tokens(text: str) -> list[tuple[str, str]]:
    """``text`` as ``("text", literal)`` and ``("action", body)`` tokens."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _ACTION.finditer(text):
        if m.start() > pos:
            out.append(("text", text[pos:m.start()]))
        out.append(("action", m.group(1).strip()))
        pos = m.end()
    if pos < len(text):
        out.append(("text", text[pos:]))
    return out


def render_template(text: str, labels: dict[str, str], value: float) -> str:
    """Render an annotation as Prometheus would: ``{{ $labels.x }}``, ``{{ . }}``,
    ``{{ printf "%.3g" $value }}``, ``{{ $value | humanizePercentage }}``,
    ``{{ $labels.x | urlquery }}``, ``{{ "a string" }}`` and
    ``{{ with $labels.x }}…{{ else }}…{{ end }}``. Raises ``ValueError`` on anything else."""
    toks = _tokens(text)

    def run(i: int, dot: str, out: list[str], emit: bool) -> tuple[int, str]:
        while i < len(toks):
            kind, body = toks[i]
            i += 1
            if kind == "text":
                if emit:
                    out.append(body)
                continue
            if body in ("else", "end"):
                return i, body
            if body.startswith("with "):
                m = re.fullmatch(r"with \$labels\.(\w+)", body)
                if not m:
                    raise ValueError(f"unsupported template action {body!r}")
                val = labels.get(m.group(1), "")
                i, stop = run(i, val, out, emit and bool(val))
                if stop == "else":
                    i, stop = run(i, dot, out, emit and not val)
                if stop != "end":
                    raise ValueError("unterminated {{ with }}")
                continue
            if emit:
                out.append(_action(body, labels, value, dot))
        return i, ""

    out: list[str] = []
    run(0, "", out, True)
    return "".join(out)


_GO_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_GO_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"'}


def _go_string(literal: str) -> str:
    """The value of a Go interpreted string literal (the escapes :func:`~fleetwatch.
    promql.string` writes: ``\\\\ \\" \\n \\r \\t \\xHH``)."""
    out: list[str] = []
    i, body = 0, literal[1:-1]
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
        elif body[i + 1] == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        else:
            out.append(_GO_ESCAPES[body[i + 1]])
            i += 2
    return "".join(out)


def _action(body: str, labels: dict[str, str], value: float, dot: str) -> str:
    if body == ".":
        return dot
    if _GO_STRING.fullmatch(body):
        return _go_string(body)
    m = re.fullmatch(r"\$labels\.(\w+)", body)
    if m:
        return labels.get(m.group(1), "")
    m = re.fullmatch(r"\$labels\.(\w+) \| urlquery", body)
    if m:  # Go's url.QueryEscape
        return urllib.parse.quote_plus(labels.get(m.group(1), ""))
    m = re.fullmatch(r'printf "(%[.0-9]*[gfe])" \$value', body)
    if m:
        return m.group(1) % value
    if body == "$value | humanizePercentage":
        return "%.4g%%" % (value * 100)
    raise ValueError(f"unsupported template action {body!r}")
