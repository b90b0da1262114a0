"""Model-name globs (``fnmatch``) as RE2 regexes for PromQL ``=~`` matchers.

:func:`glob_regex` ``(glob: str) -> str`` is pure; PromQL anchors the regex (``^(?:…)$``),
so the result must match exactly the names ``fnmatch.fnmatchcase(name, glob)`` matches.
"""

from __future__ import annotations

from fleetwatch.promql import NEVER, regex_escape


def glob_regex(glob: str) -> str:
    """An RE2 regex (anchored by PromQL) matching exactly what
    ``fnmatch.fnmatchcase(name, glob)`` matches: ``*`` → ``.*``, ``?`` → ``.`` (both also
    match a newline, as in ``fnmatch``: the regex is then wrapped in ``(?s:…)``), ``[abc]``,
    ``[!a-z]`` classes with their members escaped (``]``, ``[``, ``\\``, ``^``, ``-`` are
    data, never RE2 syntax such as ``[[:alpha:]]``), empty ranges (``[z-a]``) never match,
    an unclosed ``[`` is a literal; every other character is escaped."""
    out: list[str] = []
    dotall = False
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not out or out[-1] != ".*":  # a** is a*
                out.append(".*")
            dotall = True
        elif c == "?":
            out.append(".")
            dotall = True
        elif c == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                out.append("\\[")
            else:
                cls = _glob_class(glob, i, j)
                dotall = dotall or cls == "."
                out.append(cls)
                i = j + 1
        else:
            out.append(regex_escape(c))
    rx = "".join(out)
    return f"(?s:{rx})" if dotall else rx


def _glob_class(pat: str, i: int, j: int) -> str:
    """The RE2 form of the ``fnmatch`` class ``pat[i:j]`` (between ``[`` and ``]``).

    The members are those of the Python regex ``fnmatch.translate`` writes (the same
    algorithm, chunks around ``-`` and empty ranges removed), read back as Python's
    ``re`` parser does and written with every non-alphanumeric member escaped."""
    stuff = pat[i:j]
    if "-" in stuff:
        chunks = []
        k = i + 2 if pat[i] == "!" else i + 1
        while True:
            k = pat.find("-", k, j)
            if k < 0:
                break
            chunks.append(pat[i:k])
            i = k + 1
            k = k + 3
        chunk = pat[i:j]
        if chunk:
            chunks.append(chunk)
        else:
            chunks[-1] += "-"
        for k in range(len(chunks) - 1, 0, -1):  # empty ranges (z-a) are dropped
            if chunks[k - 1][-1] > chunks[k][0]:
                chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
                del chunks[k]
        # members: (char, is_range_operator); the hyphens joining chunks make ranges
        tokens: list[tuple[str, bool]] = []
        for m, part in enumerate(chunks):
            if m:
                tokens.append(("-", True))
            tokens += [(ch, False) for ch in part]
    else:
        tokens = [(ch, False) for ch in stuff]
    if not tokens:
        return NEVER
    if tokens == [("!", False)]:
        return "."
    negate = tokens[0] == ("!", False)
    if negate:
        tokens = tokens[1:]
    members: list[str] = []
    t = 0
    while t < len(tokens):
        lo = tokens[t][0]
        t += 1
        if t < len(tokens) and tokens[t][1]:
            if t + 1 == len(tokens):  # a trailing "-" is a member
                members += [_class_char(lo), _class_char("-")]
                break
            hi = tokens[t + 1][0]
            t += 2
            members.append(f"{_class_char(lo)}-{_class_char(hi)}")
        else:
            members.append(_class_char(lo))
    return "[" + ("^" if negate else "") + "".join(members) + "]"


def _class_char(c: str) -> str:
    """One member of an RE2 character class: letters, digits and non-ASCII as they are,
    control characters as ``\\xHH``, ASCII punctuation behind a backslash."""
    if c.isalnum() or ord(c) > 0x7F or c == " ":
        return c
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\x{ord(c):02x}"
    return "\\" + c
