"""Hostile but legal registry entries, SLO files and alerting configurations against the
rules and Alertmanager generators, checked by the real tools (promtool, amtool).

Every value a person can write in a YAML file must come out of ``fleetwatch rules`` and
``fleetwatch alertmanager`` as data: valid PromQL (string literals escaped, regexes built
from globs escaped and as exact as ``fnmatch``), valid YAML, and never evaluated as a
Prometheus template (``{{ … }}`` in a team or owner stays text).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fleetwatch.alerts.generate import (
    RULE_FILES,
    build_rules,
    load_inputs,
    write_files,
)

#: Values that have broken (or could break) a generator: quoting, escapes, newlines, braces,
#: PromQL matcher operators, templates, YAML syntax, unicode, globs, PromQL keywords.
HOSTILE = [
    'we"ird',
    "back\\slash",
    "new\nline",
    "tab\there",
    "}{=~'",
    "{{ $value }}",
    '{{ template "x" }}',
    "{{ .Owner }}",
    "x{",
    "}}",
    "'single'",
    "- yaml: [list]",
    "&anchor *alias !tag",
    "key: value # comment",
    "|pipe >fold",
    "null",
    "~",
    "yes",
    "✓ ünïcode team",
    "spaces  inside ",
    "%percent @at `tick`",
    "$labels.model",
]


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: install Debian's prometheus and "
                    "prometheus-alertmanager packages (.ci/run does)", pytrace=False)
    return path


def run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, timeout=120)


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False),
                    encoding="utf-8")
    return path


SLOS = {"slos": [{"name": "avail", "sli": {"availability": {}},
                  "objectives": [{"target": 0.999}],
                  "timeWindow": [{"duration": "30d"}], "concurrency": {"envelope": 4}}]}


def generate(tmp_path: Path, models: list[dict], slos: dict | None = None,
             receivers: dict | None = None, tests: bool = False) -> Path:
    reg = write_yaml(tmp_path / "models.yaml", {"models": models})
    slo = write_yaml(tmp_path / "slos.yaml", slos or SLOS)
    rcv = write_yaml(tmp_path / "receivers.yaml", receivers) if receivers else None
    registry, slo_file, cfg = load_inputs(reg, slo, rcv)
    assert slo_file is not None
    out = tmp_path / "out"
    write_files(build_rules(registry, slo_file, cfg, ["x"], tests=tests), out)
    return out


def check_rules(out: Path) -> None:
    res = run(tool("promtool"), "check", "rules", *(str(out / f) for f in RULE_FILES))
    assert res.returncode == 0, res.stdout + res.stderr


def entry(name: str, value: str = "v") -> dict:
    return {"name": name, "team": value, "owner": value, "oncall": value,
            "latency_tier": value}


# -- PromQL string literals -------------------------------------------------------------------
def test_model_names_with_quotes_backslashes_and_newlines_are_valid_promql(tmp_path):
    """A registry name with a newline once gave ``unterminated quoted string`` in every
    FleetwatchModelNotReady rule (the name also goes into later rules' ``unless``)."""
    names = [v for v in HOSTILE if "{{" not in v]  # templates: see the template tests
    out = generate(tmp_path, [entry(v) for v in names] + [entry("after")])
    check_rules(out)


# -- regexes from globs -----------------------------------------------------------------------
NASTY_GLOBS = ["[z-a]weird", "[!]x]", "[[:alpha:]]", "[a-]", "[\\]", "[-a]", "[!-a]", "[]-a]",
               "[a-c-e]", "[!]", "[]]", "x[!", "[a--]", "[--z]", "[a&&b]", "a.b+c(d)|e^f$g",
               "llama-[0-9]*?", "by", "offset", "bool", "*", "?", "[^a]", "{a,b}", "a\nb*"]


def _python(rx: str) -> str:
    """An RE2 regex of :func:`glob_regex` in Python's ``re`` dialect (only the code point
    escape differs)."""
    return rx.replace("\\x{10FFFF}", "\\U0010FFFF")


def _agrees(glob: str, name: str) -> None:
    import fnmatch
    import re

    from fleetwatch.alerts.promql import glob_regex

    try:
        expected = fnmatch.fnmatchcase(name, glob)
    except (re.error, IndexError):  # pragma: no cover - fnmatch's own limits
        return
    assert bool(re.fullmatch(_python(glob_regex(glob)), name)) == expected, (glob, name)


@pytest.mark.parametrize("glob", NASTY_GLOBS)
@pytest.mark.parametrize("name", ["zweird", "]", "x", "[", ":", "a", "-", "\\", "b", "!",
                                  "&", "a.b+c(d)|e^f$g", "llama-7x", "by", "\n", "a\nbc",
                                  "^", "{a,b}", "weird"])
def test_glob_regex_matches_exactly_what_fnmatch_matches(glob, name):
    """Classes such as ``[[:alpha:]]``, ``[!]x]`` or ``[z-a]`` once gave RE2 syntax errors
    (``missing closing ]``, ``invalid character class range``) or other matches."""
    _agrees(glob, name)


def test_glob_regex_agrees_with_fnmatch_on_generated_globs():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = st.sampled_from(list("ab-]![*?\\^z.&\n:"))

    @settings(max_examples=3000, deadline=None, database=None)
    @given(st.text(alphabet, max_size=8), st.text(alphabet, max_size=5))
    def check(glob, name):
        _agrees(glob, name)

    check()


def test_nasty_globs_give_valid_rules(tmp_path):
    """promtool accepts every regex built from these globs (the FleetwatchModelNotReady rules
    and their ``unless`` of earlier entries)."""
    out = generate(tmp_path, [entry(g) for g in NASTY_GLOBS], tests=False)
    check_rules(out)
