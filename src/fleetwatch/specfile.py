"""Reading the YAML files fleetwatch takes (sidecar config, registry, SLOs, alerting
config) and saying what is wrong with them: one place, so every file gets the same
errors — ``FILE: cannot read …``, ``FILE: not UTF-8 text``, ``FILE: not valid YAML: line
L, column C: …`` and,
for a pydantic validation error, one line per problem ``FILE: a.b[2].c: message``.

One loader for every file: PyYAML's safe loader (no Python objects), with aliases
bounded. An alias re-uses a node, so a few lines of anchors can stand for billions of
nodes ("billion laughs"), which any walk of the document — validation included — then
visits. Before constructing anything, the document's size *with aliases expanded* is
counted in linear time (each node once, memoized); past :data:`MAX_NODES` the file is
refused: ``FILE: too many YAML nodes once aliases are expanded (more than 1000000): an
alias bomb?``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


#: PyYAML's safe loader, libyaml's when PyYAML was built with it (several times faster on
#: a configuration of thousands of targets).
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Nodes a document may hold once its aliases are expanded (a 16,000-target sidecar
#: configuration holds about 150,000).
MAX_NODES = 1_000_000


class _TooLarge(Exception):
    pass


def _expanded_size(node: yaml.Node, memo: dict[int, int], limit: int) -> int:
    """Nodes of ``node`` with aliases expanded (each distinct node computed once); raises
    :class:`_TooLarge` past ``limit``. Iterative: deep nesting cannot overflow the stack."""
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if id(n) in memo:
            continue
        children: list[yaml.Node] = []
        if isinstance(n, yaml.SequenceNode):
            children = list(n.value)
        elif isinstance(n, yaml.MappingNode):
            children = [x for pair in n.value for x in pair]
        if not done:
            stack.append((n, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        size = 1 + sum(memo[id(c)] for c in children)
        if size > limit:
            raise _TooLarge
        memo[id(n)] = size
    return memo[id(node)]


def load_yaml(text: str, limit: int = MAX_NODES) -> object:
    """Parse YAML with the safe loader, refusing a document larger than ``limit`` nodes
    with aliases expanded (raises ``yaml.YAMLError`` with a readable message). A document
    libyaml refuses is read again by PyYAML's own loader, whose messages (and escapes such
    as ``\\ud800``, which the SLO file reports itself) the errors have always used."""
    try:
        return _load(SafeLoader, text, limit)
    except _AliasBomb:
        raise
    except yaml.YAMLError:
        if SafeLoader is yaml.SafeLoader:
            raise
        return _load(yaml.SafeLoader, text, limit)


class _AliasBomb(yaml.YAMLError):
    pass


def _load(loader_class: type[yaml.SafeLoader], text: str, limit: int) -> object:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            _expanded_size(node, {}, limit)
        except _TooLarge:
            raise _AliasBomb(f"too many YAML nodes once aliases are expanded (more "
                             f"than {limit}): an alias bomb?") from None
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: str | Path, error: type[Exception], what: str) -> object:
    """Parsed YAML of ``path`` (:func:`load_yaml`); raises ``error`` (e.g.
    ``ConfigError``) naming the file when it cannot be read, is not UTF-8, is not YAML or
    expands past :data:`MAX_NODES`. ``what`` names the file's role in messages
    ("configuration", "registry", …)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{p}: not UTF-8 text (byte {exc.start}): cannot read {what}") from None
    except OSError as exc:
        raise error(f"{p}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return load_yaml(text)
    except _AliasBomb as exc:
        raise error(f"{p}: {exc}") from None
    except yaml.YAMLError as exc:
        raise error(f"{p}: not valid YAML: {yaml_problem(exc)}") from None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML error: ``line L, column C: PROBLEM (CONTEXT at line L, column
    C)`` from PyYAML's marks (1-based, as editors count), instead of its multi-line text
    that names ``<unicode string>`` rather than the file."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return " ".join(str(exc).split())
    text = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:
        where = f" at line {cmark.line + 1}, column {cmark.column + 1}" if cmark else ""
        text += f" ({context}{where})"
    return text


def validate(model: type[M], data: object, source: str, error: type[Exception],
             expected: str) -> M:
    """``model.model_validate(data)``; raises ``error`` naming ``source`` and each field,
    or saying ``expected`` (e.g. "a mapping with a 'targets:' list") for a non-mapping."""
    if not isinstance(data, dict):
        raise error(f"{source}: expected {expected}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(format_validation_error(exc, source)) from None


def error_message(err: Mapping[str, Any]) -> str:
    """The message of one pydantic error (an item of ``ValidationError.errors()``) in the
    file's terms: ``unknown field`` for an extra, a validator's own text without
    pydantic's ``Value error, `` prefix, and a URL error that says what was expected."""
    kind, msg = err["type"], str(err["msg"])
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "url_parsing":
        return f"not a valid URL ({msg.removeprefix('Input should be a valid URL, ')})"
    return msg


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One line per error: ``SOURCE: a.b[2].c: message`` (:func:`error_message`)."""
    lines = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        lines.append(f"{source}: {path or '(top level)'}: {error_message(err)}")
    return "\n".join(lines)
