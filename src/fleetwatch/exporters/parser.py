"""A fast, strict reader of the Prometheus text format (0.0.4), tolerant of OpenMetrics.

The sidecar's hot path reads every upstream exposition once per scrape interval, so this
module splits lines cheaply and leaves label parsing to a strict slow path whose result
callers cache (label sets repeat on every scrape). It agrees with
``prometheus_client.parser`` on well-formed input (a differential test checks every
fixture) and reports, rather than raises on, malformed lines.

Accepted beyond text 0.0.4: OpenMetrics ``# EOF``/``# UNIT`` lines, exemplars after
`` # `` and spaces after commas in label sets. Timestamps are read and ignored (the
sidecar re-exposes current state).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from fleetwatch.labels.text import LabelPairs, escape_label_value, render_labels

__all__ = ["LabelPairs", "escape_label_value", "render_labels"]  # re-exported helpers

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
#: A label block as exporters write it: no spaces, no escapes (read with one findall).
_PLAIN_BLOCK_RE = re.compile(
    r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*",)*(?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")?\}\Z')
_PLAIN_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class ExpositionError(ValueError):
    """A line of an exposition cannot be read; the message says why."""


@dataclass
class InvalidLine:
    """One skipped line: 1-based line number, reason, and the line (cut to 200 chars)."""

    lineno: int
    reason: str
    line: str


@dataclass
class Metadata:
    """HELP/TYPE information collected while scanning; ``types`` maps family → type."""

    types: dict[str, str] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)
    invalid: list[InvalidLine] = field(default_factory=list)
    sample_lines: int = 0

    def bad(self, lineno: int, reason: str, line: str) -> None:
        self.invalid.append(InvalidLine(lineno, reason, line[:200]))


def iter_samples(text: str, meta: Metadata) -> Iterator[tuple[str, str, int]]:
    """Yield ``(series_key, value_token, lineno)`` for each sample line of ``text``.

    ``series_key`` is the raw ``name{labels}`` text, unparsed (use :func:`split_key` on it,
    and cache the result). HELP/TYPE lines fill ``meta``; malformed lines are recorded in
    ``meta.invalid`` and skipped. Never raises on bad input.
    """
    for line, lineno in iter_lines(text, meta):
        split = split_sample_line(line)
        if split.__class__ is str:
            meta.bad(lineno, split, line)
            continue
        meta.sample_lines += 1
        yield split[0], split[1], lineno


def iter_lines(text: str, meta: Metadata) -> Iterator[tuple[str, int]]:
    """Yield ``(line, lineno)`` for each sample line (not blank, not a comment) of
    ``text``; HELP/TYPE lines fill ``meta``. A UTF-8 byte-order mark is skipped and
    nothing after an OpenMetrics ``# EOF`` counts."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lineno = 0
    for line in text.split("\n"):
        lineno += 1
        if not line:
            continue
        if line[0] == "#":
            if line.rstrip() == "# EOF":
                return
            read_comment(line, meta, lineno)
            continue
        yield line, lineno


_BLANKS = re.compile(r"[ \t]+")


def split_sample_line(line: str) -> tuple[str, str] | str:
    """``(series_key, value_token)`` of a sample line, or the reason it is malformed.

    The key is the raw ``name{labels}`` text; exemplars (`` # {…} v``), a timestamp and a
    trailing CR are accepted and left out.
    """
    if line[-1] == "\r":
        line = line[:-1]
    brace = line.find("{")
    if brace >= 0:
        if " # " in line:
            split = _split_exemplar_line(line)
            if split is None:
                return "unterminated label set"
            key, rest = split
        else:
            close = line.rfind("}")
            if close < brace:
                return "unterminated label set"
            key = line[: close + 1]
            rest = line[close + 1 :]
    else:
        sp = line.find(" ")
        if sp < 0:
            sp = line.find("\t")
            if sp < 0:
                return "sample line without a value"
        key = line[:sp]
        rest = line[sp:]
        if " # " in rest:
            rest = rest[: rest.index(" # ")]
    # the format's blanks are spaces and tabs (Prometheus' parser), not every Unicode space:
    # "1\u00a0" is an invalid value there, and here
    parts = [p for p in _BLANKS.split(rest) if p]
    if not parts or len(parts) > 2:
        return "expected 'value [timestamp]' after the series"
    return key, parts[0]


def _split_exemplar_line(line: str) -> tuple[str, str] | None:
    """Split ``name{labels} value # {exemplar} v`` honouring quotes in label values."""
    i = line.find("{")
    in_quotes = False
    n = len(line)
    j = i + 1
    while j < n:
        c = line[j]
        if in_quotes:
            if c == "\\":
                j += 2
                continue
            if c == '"':
                in_quotes = False
        elif c == '"':
            in_quotes = True
        elif c == "}":
            rest = line[j + 1 :]
            cut = rest.find(" # ")
            return line[: j + 1], rest if cut < 0 else rest[:cut]
        j += 1
    return None


def read_comment(line: str, meta: Metadata, lineno: int) -> None:
    """Read a comment line into ``meta`` (HELP/TYPE; a bad TYPE is recorded as invalid)."""
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
        return  # plain comment, "# EOF", "# UNIT …"
    name = parts[2]
    if parts[1] == "TYPE":
        typ = parts[3].strip() if len(parts) > 3 else ""
        if typ not in ("counter", "gauge", "histogram", "summary", "untyped", "unknown",
                       "info", "stateset", "gaugehistogram"):
            meta.bad(lineno, f"unknown TYPE {typ!r}", line)
            return
        if name in meta.types and meta.types[name] != typ:
            meta.bad(lineno, f"family {name} declared again with another type", line)
            return
        meta.types[name] = typ
    else:
        meta.helps.setdefault(name, parts[3] if len(parts) > 3 else "")


def split_key(key: str) -> tuple[str, LabelPairs]:
    """Parse a raw series key ``name{a="b",…}`` into ``(name, ((label, value), …))``.

    Label values are unescaped (``\\\\``, ``\\"``, ``\\n``). Raises
    :class:`ExpositionError` on an invalid metric name, label name, missing quote, a bad
    escape or a repeated label.
    """
    brace = key.find("{")
    if brace < 0:
        name = key.strip()
        if not _NAME_RE.match(name):
            raise ExpositionError(f"invalid metric name {name!r}")
        return name, ()
    name = key[:brace].strip()
    if not _NAME_RE.match(name):
        raise ExpositionError(f"invalid metric name {name!r}")
    return name, parse_label_block(key[brace:])


def parse_label_block(block: str) -> LabelPairs:
    """Parse ``{a="b", c="d"}`` (trailing comma allowed) into label pairs; see split_key."""
    if _PLAIN_BLOCK_RE.match(block):  # the common spelling: one C-level pass
        plain: LabelPairs = tuple(_PLAIN_PAIR_RE.findall(block))
        if len(dict(plain)) == len(plain) and ("__" not in block or not any(
                k.startswith("__") for k, _v in plain)):
            return plain
    if not block.startswith("{") or not block.endswith("}"):
        raise ExpositionError("label set must be enclosed in braces")
    s = block[1:-1]
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in " \t":
            i += 1
        if i >= n:
            break
        eq = s.find("=", i)
        if eq < 0:
            raise ExpositionError(f"label without '=' in {block[:80]!r}")
        lname = s[i:eq].strip()
        if not _LABEL_NAME_RE.match(lname):
            raise ExpositionError(f"invalid label name {lname!r}")
        if lname.startswith("__"):
            raise ExpositionError(f"reserved label name {lname!r} (leading '__')")
        j = eq + 1
        while j < n and s[j] in " \t":
            j += 1
        if j >= n or s[j] != '"':
            raise ExpositionError(f"label {lname} value is not quoted")
        j += 1
        q = s.find('"', j)
        if q >= 0 and s.find("\\", j, q) < 0:  # no escape: the value is one slice
            value = s[j:q]
            j = q
        else:
            value, j = _escaped_value(s, j, lname)
        if lname in seen:
            raise ExpositionError(f"label {lname} repeated")
        seen.add(lname)
        pairs.append((lname, value))
        j += 1
        while j < n and s[j] in " \t":
            j += 1
        if j < n:
            if s[j] != ",":
                raise ExpositionError(f"expected ',' after label {lname}")
            j += 1
        i = j
    return tuple(pairs)


def _escaped_value(s: str, j: int, lname: str) -> tuple[str, int]:
    """A quoted label value starting at ``s[j]`` (after its opening quote), escapes
    resolved, and the position of its closing quote; raises :class:`ExpositionError`
    for a bad escape or a value not terminated."""
    n = len(s)
    buf: list[str] = []
    start = j
    while True:
        if j >= n:
            raise ExpositionError(f"label {lname} value is not terminated")
        c = s[j]
        if c == "\\":
            if j + 1 >= n or s[j + 1] not in _ESCAPES:
                raise ExpositionError(f"bad escape in label {lname}")
            buf.append(s[start:j])
            buf.append(_ESCAPES[s[j + 1]])
            j += 2
            start = j
            continue
        if c == '"':
            buf.append(s[start:j])
            return "".join(buf), j
        j += 1


def format_value(value: float) -> str:
    """Format a sample value the way Prometheus reads it (``NaN``, ``+Inf``, shortest repr)."""
    if value != value:
        return "NaN"
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    return repr(value)


def parse_value(token: str) -> float:
    """Parse a sample value token; raise :class:`ExpositionError` if it is not a float."""
    if "_" in token or not token.isascii():  # Python's float takes "1_0" and "١"
        raise ExpositionError(f"invalid sample value {token!r}")
    try:
        return float(token)
    except ValueError:
        raise ExpositionError(f"invalid sample value {token!r}") from None


def parse_exposition(text: str) -> tuple[list[tuple[str, LabelPairs, float]], Metadata]:
    """Parse a whole exposition into ``[(sample_name, labels, value)]`` plus metadata.

    The convenience (slow) form of :func:`iter_samples` + :func:`split_key`, used by
    tests and the offline tools; invalid lines end up in ``Metadata.invalid``.
    """
    meta = Metadata()
    out: list[tuple[str, LabelPairs, float]] = []
    for key, tok, lineno in iter_samples(text, meta):
        try:
            name, labels = split_key(key)
            out.append((name, labels, parse_value(tok)))
        except ExpositionError as exc:
            meta.bad(lineno, str(exc), key)
    return out, meta


def describe_if_not_metrics(text: str) -> str | None:
    """None when ``text`` holds at least one valid sample or HELP/TYPE line; otherwise why
    it is not a Prometheus exposition (first problem and its line number). Slow path: call
    it only when normalizing produced nothing."""
    samples, meta = parse_exposition(text)
    if samples or meta.types or meta.helps:
        return None
    if meta.invalid:
        first = meta.invalid[0]
        return f"no Prometheus metric lines ({first.reason} at line {first.lineno})"
    return "no Prometheus metric lines"
