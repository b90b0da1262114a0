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
alias bomb?``.

Three departures from PyYAML's YAML 1.1 reading, all toward YAML 1.2 (the YAML
specification, "Mapping" and "Core Schema"):

* **A key appears once in a mapping.** PyYAML keeps the last of repeated keys, so a team
  listed twice in a quota file or a repeated ``listen.port`` would silently replace the
  first; here it is an error naming the line and the key: ``FILE: not valid YAML: line L,
  column C: duplicate key 'port' (first at line K)``. Keys merged in with ``<<: *anchor``
  may be overridden, as YAML's merge key allows.
* **Numbers with an exponent are numbers**: ``1e308``, ``1.5e9`` and ``2E-3`` (YAML 1.2
  core schema floats) read as floats, where YAML 1.1 — and PyYAML — wants a dot and a
  signed exponent (``1.0e+308``) and reads the rest as text. ``1e400`` reads as infinity,
  which every numeric field refuses with its bound.
* **Dates are text** (the core schema has no timestamp type): ``2026-12-06`` is the
  string a field may parse as a date, and an impossible date (``2026-13-45``) is that
  field's validation error, never a crash of the loader. An explicit ``!!timestamp``
  tag that does not parse is a YAML error."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


#: YAML 1.2 core schema floats with an exponent (YAML 1.1 wants a dot and a signed one).
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$")
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _unique_keys(loader: yaml.constructor.BaseConstructor, node: yaml.MappingNode) -> None:
    """Raise ``ConstructorError`` at the second occurrence of a key of ``node`` (merge keys
    ``<<`` and what they bring in are not counted: overriding them is what they are for)."""
    first: dict[object, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            seen = first.setdefault(key, key_node)
        except TypeError:  # an unhashable key: PyYAML's own error follows
            continue
        if seen is not key_node:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen.start_mark.line + 1})",
                key_node.start_mark)


def _construct_mapping(self: yaml.constructor.SafeConstructor, node: yaml.MappingNode,
                       deep: bool = False) -> dict[object, object]:
    """PyYAML's ``construct_mapping``, after :func:`_unique_keys`."""
    if isinstance(node, yaml.MappingNode):
        _unique_keys(self, node)
    return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep=deep)


class _PySafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader with unique keys and YAML 1.2 exponent floats."""

    construct_mapping = _construct_mapping


_PySafeLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                    list("-+.0123456789"))
# YAML 1.2's core schema has no timestamps: a date is text, validated by the field that
# reads it (so ``date: 2026-13-45`` is a field error, and ``model_version: 2025-01-16``
# is the text it looks like, not a date object). add_implicit_resolver above gave this
# class its own copy of the resolver table.
for _first, _resolvers in _PySafeLoader.yaml_implicit_resolvers.items():
    _resolvers[:] = [r for r in _resolvers if r[0] != "tag:yaml.org,2002:timestamp"]
_LOADERS: list[type[yaml.SafeLoader]] = [_PySafeLoader]
if hasattr(yaml, "CSafeLoader"):
    class _CSafeLoader(yaml.CSafeLoader):
        """libyaml's parser with :class:`_PySafeLoader`'s construction and resolution."""

        construct_mapping = _construct_mapping
        yaml_implicit_resolvers = _PySafeLoader.yaml_implicit_resolvers

    _LOADERS.insert(0, _CSafeLoader)  # type: ignore[arg-type]

#: The loader: PyYAML's safe one, on libyaml's parser when PyYAML was built with it
#: (several times faster on a configuration of thousands of targets), with unique keys
#: and YAML 1.2 exponent floats (module doc).
SafeLoader: type[yaml.SafeLoader] = _LOADERS[0]

#: Nodes a document may hold once its aliases are expanded (a 16,000-target sidecar
#: configuration holds about 150,000).
MAX_NODES = 1_000_000


class _TooLarge(Exception):
    pass


class _Recursive(Exception):
    pass


def _expanded_size(node: yaml.Node, memo: dict[int, int], limit: int) -> int:
    """Nodes of ``node`` with aliases expanded (each distinct node computed once); raises
    :class:`_TooLarge` past ``limit`` and :class:`_Recursive` for a node that contains
    itself (``&a [*a]``: infinitely many nodes once expanded). Iterative: deep nesting
    cannot overflow the stack."""
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    open_: set[int] = set()  # nodes whose children are being sized: their ancestors' path
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
            if id(n) in open_:
                raise _Recursive
            open_.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        open_.discard(id(n))
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
        if SafeLoader is _PySafeLoader:
            raise
        return _load(_PySafeLoader, text, limit)


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
        except _Recursive:
            raise _AliasBomb("an anchor that contains itself (a recursive alias such as "
                             "'&a [*a]'): not a configuration") from None
        try:
            return loader.construct_document(node)
        except (ValueError, OverflowError) as exc:  # an explicit tag's value (!!timestamp)
            raise yaml.YAMLError(f"a tagged value that cannot be read: {exc}") from None
    finally:
        loader.dispose()


def read_text(path: str | Path, error: type[Exception], what: str = "") -> str:
    """The UTF-8 text of ``path``; raises ``error`` naming the file, in words rather than
    Python's exception text, when it cannot be read (``FILE: cannot read WHAT: No such
    file or directory``) or is not UTF-8 (``FILE: not UTF-8 text (byte N): cannot read
    WHAT``). ``what`` names the file's role ("registry", …); without it the messages end
    at ``cannot read:`` and ``(byte N)``."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        role = f": cannot read {what}" if what else ""
        raise error(f"{p}: not UTF-8 text (byte {exc.start}){role}") from None
    except OSError as exc:
        role = f" {what}" if what else ""
        raise error(f"{p}: cannot read{role}: {exc.strerror or exc}") from None


def read_yaml(path: str | Path, error: type[Exception], what: str) -> object:
    """Parsed YAML of ``path`` (:func:`load_yaml`); raises ``error`` (e.g.
    ``ConfigError``) naming the file when it cannot be read, is not UTF-8
    (:func:`read_text`), is not YAML or expands past :data:`MAX_NODES`. ``what`` names the
    file's role in messages ("configuration", "registry", …)."""
    p = Path(path)
    text = read_text(p, error, what)
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
