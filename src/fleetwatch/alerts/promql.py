"""Small PromQL text helpers: string literals, regexes from globs, the owner join."""

from __future__ import annotations

from textwrap import indent

OWNER_LABELS = ("team", "owner", "oncall")

#: One registry series per (model, model_version), whatever the number of sidecars: the
#: sidecars' ``modelserver_model_info`` reduced to its registry labels, and ``topk`` so that
#: a registry roll-out (two teams for a moment) can never make the join fail.
MODEL_OWNER = ("topk by (model, model_version) (1, group by (model, model_version, team, "
               "owner, oncall) (modelserver_model_info))")

_RE_SPECIAL = set(".^$*+?()[]{}|\\")


_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def string(text: str) -> str:
    """A PromQL double-quoted string literal of ``text`` (Go escapes: a raw newline would end
    the literal — ``unterminated quoted string`` — and other control characters are
    written as ``\\xHH``, so the rule file stays printable)."""
    out = []
    for c in text:
        esc = _STRING_ESCAPES.get(c)
        if esc is None and (ord(c) < 0x20 or ord(c) == 0x7F):
            esc = f"\\x{ord(c):02x}"
        out.append(c if esc is None else esc)
    return '"' + "".join(out) + '"'


def regex_escape(text: str) -> str:
    """Escape RE2 metacharacters (``+Inf`` → ``\\+Inf``, ``0.5`` → ``0\\.5``)."""
    return "".join("\\" + c if c in _RE_SPECIAL else c for c in text)


def glob_regex(glob: str) -> str:
    """An RE2 regex (anchored by PromQL) matching what ``fnmatch.fnmatchcase(name, glob)``
    matches: ``*`` → ``.*``, ``?`` → ``.``, ``[abc]``/``[!abc]`` classes kept."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "]") else i + 1)
            if j < 0:
                out.append("\\[")
            else:
                body = glob[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(regex_escape(c))
        i += 1
    return "".join(out)


def alternation(regexes: list[str]) -> str:
    """``a|b|c`` of distinct regexes, in order."""
    seen: list[str] = []
    for r in regexes:
        if r not in seen:
            seen.append(r)
    return "|".join(seen)


def block(expr: str, prefix: str = "  ") -> str:
    """Indent every line of ``expr``."""
    return indent(expr, prefix)


def with_owner(expr: str, fallback_team: str) -> str:
    """``expr`` (with ``model, model_version`` labels) plus the registry's ``team, owner,
    oncall`` joined at query time from ``modelserver_model_info``.

    Series without a registry entry (or whose info series is gone, e.g. while their
    upstream is down) are kept, not dropped: they get ``team=<fallback_team>``.
    """
    inner = block(expr, "    ")
    return (f"label_replace(\n  (\n{inner}\n  )\n"
            f"  * on (model, model_version) group_left ({', '.join(OWNER_LABELS)})\n"
            f"    {MODEL_OWNER}\n"
            f"  or ignoring ({', '.join(OWNER_LABELS)})\n  (\n{inner}\n  ),\n"
            f"  \"team\", {string(fallback_team)}, \"team\", \"\"\n)")
