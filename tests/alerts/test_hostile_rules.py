"""Hostile but legal registry entries, SLO files and alerting configurations against the
rules and Alertmanager generators, checked by the real tools (promtool, amtool).

Every value a person can write in a YAML file must come out of ``fleetwatch rules`` and
``fleetwatch alertmanager`` as data: valid PromQL (string literals escaped, regexes built
from globs escaped and as exact as ``fnmatch``), valid YAML, and never evaluated as a
Prometheus template (``{{ … }}`` in a team or owner stays text).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from fleetwatch.alerts.generate import (
    RULE_FILES,
    build_rules,
    load_inputs,
)
from fleetwatch.files import write_tree as write_files
from tests.support.helpers import tool

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
             receivers: dict | None = None, tests: bool = False,
             not_covered: list[str] | None = None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    reg = write_yaml(tmp_path / "models.yaml", {"models": models})
    slo = write_yaml(tmp_path / "slos.yaml", slos or SLOS)
    rcv = write_yaml(tmp_path / "receivers.yaml", receivers) if receivers else None
    registry, slo_file, cfg = load_inputs(reg, slo, rcv)
    assert slo_file is not None
    out = tmp_path / "out"
    write_files(build_rules(registry, slo_file, cfg, ["x"], tests=tests,
                            not_covered=not_covered), out)
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


#: The names every glob of :data:`NASTY_GLOBS` is matched against.
NAMES = ["zweird", "]", "x", "[", ":", "a", "-", "\\", "b", "!", "&", "a.b+c(d)|e^f$g",
         "llama-7x", "by", "\n", "a\nbc", "^", "{a,b}", "weird"]


def prometheus_agrees_with_fnmatch(cases: list[tuple[str, list[str]]], tmp_path: Path) -> None:
    """For every ``(glob, names)``: Prometheus' own regex matcher (Go's RE2 syntax, run by
    ``promtool test rules``) selects, with ``name=~glob_regex(glob)``, exactly the names
    ``fnmatch.fnmatchcase`` matches. All cases go into one test group of one file (one
    promtool run); a regex Prometheus cannot parse fails it too. ``fnmatch`` raising is a
    failure of the case, not a skip."""
    import fnmatch

    from fleetwatch.promql import selector, string
    from fleetwatch.promql.glob import glob_regex

    series, exprs = [], []
    for i, (glob, names) in enumerate(cases):
        names = list(dict.fromkeys(names))
        series += [{"series": selector("m", {"case": str(i), "name": n}), "values": "1"}
                   for n in names]
        exprs.append({"expr": f"m{{case=\"{i}\", name=~{string(glob_regex(glob))}}}",
                      "eval_time": "0m",
                      "exp_samples": [{"labels": selector("m", {"case": str(i), "name": n}),
                                       "value": 1}
                                      for n in names if fnmatch.fnmatchcase(n, glob)]})
    doc = {"tests": [{"name": "globs", "interval": "1m", "input_series": series,
                      "promql_expr_test": exprs}]}
    path = tmp_path / "globs.test.yml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    res = run(tool("promtool"), "test", "rules", str(path))
    assert res.returncode == 0, (
        "Prometheus and fnmatch disagree (label case = index into the cases: "
        f"{list(enumerate(cases))[:50]}):\n{res.stdout[-4000:]}{res.stderr[-2000:]}")


def test_glob_regex_matches_exactly_what_fnmatch_matches(tmp_path):
    """Classes such as ``[[:alpha:]]``, ``[!]x]`` or ``[z-a]`` once gave RE2 syntax errors
    (``missing closing ]``, ``invalid character class range``) or other matches. Checked
    by Prometheus itself: every glob against every name of :data:`NAMES`."""
    prometheus_agrees_with_fnmatch([(g, NAMES) for g in NASTY_GLOBS], tmp_path)


def test_glob_regex_agrees_with_fnmatch_on_generated_globs(tmp_path):
    """3000 globs and names from an alphabet of class syntax, escapes and newlines, drawn by
    hypothesis, then checked by Prometheus in one promtool run."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from fleetwatch.promql.glob import glob_regex

    alphabet = st.sampled_from(list("ab-]![*?\\^z.&\n:"))
    cases: list[tuple[str, list[str]]] = []

    @settings(max_examples=3000, deadline=None, database=None)
    @given(st.text(alphabet, max_size=8), st.text(alphabet, max_size=5))
    def collect(glob, name):
        glob_regex(glob)  # must not raise
        cases.append((glob, [name]))

    collect()
    assert len(cases) >= 1000
    prometheus_agrees_with_fnmatch(cases, tmp_path)


def test_nasty_globs_give_valid_rules(tmp_path):
    """promtool accepts every regex built from these globs (the FleetwatchModelNotReady rules
    and their ``unless`` of earlier entries)."""
    out = generate(tmp_path, [entry(g) for g in NASTY_GLOBS], tests=False)
    check_rules(out)


# -- templates in values ----------------------------------------------------------------------
TEMPLATES = ["{{ $value }}", '{{ template "x" }}', "{{ .Owner }}", "x{", "a}}b{{c",
             '{{ y }} "q" \\ back\nline']


def test_template_values_stay_text_in_labels_and_annotations(tmp_path):
    """Alert labels and annotations are Go templates: a team, owner, on-call, latency tier
    or sidecar job with ``{{`` once made ``promtool check rules`` fail (``function "y" not
    defined``) or was evaluated (``{{ $value }}`` became the alert's value). Checked by
    promtool itself: the alerts fire with the values as they are written."""
    from fleetwatch.alerts import alerting as al
    from fleetwatch.alerts.generate import PLATFORM_FILE, SLO_FILE
    from fleetwatch.alerts.gotemplate import render_template

    models = [{"name": f"m{i}", "team": v, "owner": v, "oncall": v, "latency_tier": v}
              for i, v in enumerate(TEMPLATES)]
    slos = {"slos": [{**SLOS["slos"][0], "selector": {"models": ["m0"]}}]}
    job = TEMPLATES[-1]
    out = generate(tmp_path, models, slos, {"platform": {"sidecar_job": job}})
    check_rules(out)

    rules = {}
    for f in (PLATFORM_FILE, SLO_FILE):
        for g in yaml.safe_load((out / f).read_text())["groups"]:
            for r in g["rules"]:
                if "alert" in r:
                    key = (r["alert"], render_template(r["labels"].get("registry_entry", ""),
                                                       {}, 0))
                    rules[key] = r

    def expect(rule: dict, sample: dict[str, str], value: float) -> dict:
        labels = {**sample, **{k: render_template(v, sample, value)
                               for k, v in rule["labels"].items()}}
        notes = {k: render_template(v, sample, value) for k, v in rule["annotations"].items()}
        return {"exp_labels": labels, "exp_annotations": notes}

    side = {"job": job, "instance": "s:1", "target": "t"}
    series, not_ready = [], []
    for i, v in enumerate(TEMPLATES):
        series.append({"series": f'fleetwatch_upstream_model_ready{{job="{i}", instance="s:1", '
                                 f'target="t", model="m{i}"}}', "values": "0x20"})
        series.append({"series": f'fleetwatch_upstream_up{{job="{i}", instance="s:1", '
                                 f'target="t"}}', "values": "1x20"})
        rule = rules[(al.MODEL_NOT_READY, f"m{i}")]
        exp = expect(rule, {**side, "job": str(i), "model": f"m{i}"}, 0)
        assert {exp["exp_labels"][k] for k in ("team", "owner", "oncall", "latency_tier")} \
            == {v}
        assert f"Owner {v}, on-call {v}." in exp["exp_annotations"]["description"]
        not_ready.append(exp)
    tests = [{"eval_time": "16m", "alertname": al.MODEL_NOT_READY, "exp_alerts": not_ready}]
    # sidecar down: the job in the description; no data: the selected entry's owners
    down = expect(rules[(al.SIDECAR_DOWN, "")], {"job": job}, 1)
    assert f"(job {job})" in down["exp_annotations"]["description"]
    tests.append({"eval_time": "16m", "alertname": al.SIDECAR_DOWN, "exp_alerts": [down]})
    nodata = expect(rules[(al.SLO_NO_DATA, "")], {"slo": "avail", "band": "all"}, 1)
    assert nodata["exp_labels"]["owner"] == TEMPLATES[0]
    tests.append({"eval_time": "16m", "alertname": al.SLO_NO_DATA, "exp_alerts": [nodata]})
    doc = {"rule_files": [str(out / PLATFORM_FILE), str(out / SLO_FILE)],
           "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": tests}]}
    (tmp_path / "t.yml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    res = run(tool("promtool"), "test", "rules", str(tmp_path / "t.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


# -- behaviour tests of hostile specs ---------------------------------------------------------
def test_behaviour_tests_of_a_hostile_registry_generate_and_pass(tmp_path):
    """``fleetwatch rules --tests`` once died with ``StopIteration`` on a class glob
    (``[!]x]``: the made-up model name did not match its own entry) and wrote unescaped
    label values into the tests' series selectors. Now the tests are generated for every
    entry that can match a name, and promtool runs them: the not-ready alerts of models with
    quotes, newlines, templates and unicode fire with the owners written in the registry."""
    models = [{"name": v, "team": v, "owner": f"{v} owner", "oncall": f"{v} oncall",
               "latency_tier": v} for v in HOSTILE + NASTY_GLOBS if v not in ("*", "?")]
    models.append({"name": "x" * 3000, "team": "y" * 3000, "owner": "o", "oncall": "c"})
    slos = {"slos": [{**SLOS["slos"][0], "selector": {"models": ["we\"ird", "[!]x]"],
                                                      "teams": ['we"ird', "{{ $value }}"]}},
                     {**SLOS["slos"][0], "name": "by", "selector": {"models": ["[z-a]weird"]}}]}
    not_covered: list[str] = []
    out = generate(tmp_path, models, slos, tests=True, not_covered=not_covered)
    check_rules(out)
    res = run(tool("promtool"), "test", "rules", "fleetwatch.rules.test.yml", cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # what is not tested is said, entry by entry: globs that match no name, and globs whose
    # example name an earlier entry takes (first match wins)
    untested = {line.split("'")[1]: line.split(": ", 1)[1] for line in not_covered}
    assert all(line.startswith("FleetwatchModelNotReady of registry entry '")
               for line in not_covered), not_covered
    assert {k for k, why in untested.items() if why == "its name glob matches no model name"} \
        == {"[z-a]weird", "[a--]"}
    assert {k for k, why in untested.items() if "is taken by the earlier entry" in why} == {
        repr(g)[1:-1] for g in ("[a-]", "[\\]", "[-a]", "[!-a]", "[]-a]", "[a-c-e]", "[]]",
                                "[--z]", "[a&&b]", "[^a]")}  # names are written as repr
    doc = yaml.safe_load((out / "fleetwatch.rules.test.yml").read_text())
    fired = {(a["exp_labels"].get("registry_entry"), a["exp_labels"].get("owner"))
             for t in doc["tests"] for r in t.get("alert_rule_test", [])
             for a in r["exp_alerts"]}
    for v in ('we"ird', "new\nline", "{{ $value }}", "✓ ünïcode team", "[!]x]", "by"):
        assert (v, f"{v} owner") in fired, v


# -- the alerting configuration ---------------------------------------------------------------
@pytest.mark.parametrize(("receivers", "message"), [
    ({"platform": {"queue_wait": {"seconds": float("inf")}}},
     "platform.queue_wait.seconds: Input should be a finite number"),
    ({"prometheus_rule": {"labels": {"b: c": "x"}}}, "not a Kubernetes label key"),
    ({"prometheus_rule": {"labels": {"release": "prom\nx: y"}}},
     "not a Kubernetes label value"),
])
def test_alerting_config_values_the_outputs_cannot_hold_are_input_errors(tmp_path, receivers,
                                                                         message):
    """An infinite queue-wait threshold gave a traceback (``ValueError: inf is not a finite
    number``); PrometheusRule labels that Kubernetes rejects were written as they are."""
    import sys

    rcv = write_yaml(tmp_path / "receivers.yaml", receivers)
    reg = write_yaml(tmp_path / "models.yaml", {"models": [entry("m")]})
    slo = write_yaml(tmp_path / "slos.yaml", SLOS)
    res = subprocess.run([sys.executable, "-m", "fleetwatch.cli", "rules", "--registry",
                          str(reg), "--slos", str(slo), "--receivers", str(rcv), "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"fleetwatch: error: {rcv}: ") and message in res.stderr


def test_input_file_names_cannot_inject_yaml_through_the_header(tmp_path):
    """The "generated from" header named the input files as they are: a registry file
    called ``evil\\nfoo: bar\\n#.yaml`` added ``foo: bar`` to every generated file (promtool:
    ``field foo not found``; the Alertmanager configuration took it as a key)."""
    from fleetwatch.alerts.generate import (
        ALERTMANAGER_FILE,
        build_alertmanager_file,
        source_names,
    )

    reg = write_yaml(tmp_path / "evil\nfoo: bar\n#.yaml", {"models": [entry("m")]})
    slo = write_yaml(tmp_path / "slos.yaml", SLOS)
    rcv = write_yaml(tmp_path / "r\u2028x.yaml", {"default": {"page": "p", "ticket": "p"},
                                                  "receivers": {"p": {}}})
    registry, slo_file, cfg = load_inputs(reg, slo, rcv)
    assert slo_file is not None
    sources = source_names(reg, slo, rcv)
    files = build_rules(registry, slo_file, cfg, sources)
    files[ALERTMANAGER_FILE], _ = build_alertmanager_file(registry, cfg, slo_file, sources)
    out = tmp_path / "out"
    write_files(files, out)
    check_rules(out)
    res = run(tool("amtool"), "check-config", str(out / ALERTMANAGER_FILE))
    assert res.returncode == 0, res.stdout + res.stderr
    for name, text in files.items():
        head = text.split("\n", 2)[:2]
        assert all(line.startswith("# ") for line in head), (name, head)
        assert "evil\\x0afoo: bar\\x0a#.yaml" in head[0]
        assert "foo" not in (yaml.safe_load(text) or {}), name


def test_label_values_in_url_annotations_are_query_escaped(tmp_path):
    """``dashboard: …?var-model={model}&var-model_version={model_version}`` put the raw
    label into the URL: a model ``a&var-x=1 #b/ü`` added a query parameter and cut the URL
    at ``#``. Placeholders are now ``urlquery``-escaped (checked by promtool: the alert's
    URL is exactly the escaped one)."""
    import urllib.parse

    from fleetwatch.alerts import alerting as al
    from fleetwatch.alerts.generate import PLATFORM_FILE
    from fleetwatch.alerts.gotemplate import render_template

    model = "a&var-x=1 #b/ü"
    urls = {"runbook": "https://r.example.com/{alertname}",
            "dashboard": "https://g.example.com/d?var-model={model}&var-v={model_version}"}
    out = generate(tmp_path, [entry(model)], receivers={"urls": urls}, tests=True)
    check_rules(out)
    res = run(tool("promtool"), "test", "rules", "fleetwatch.rules.test.yml", cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rule = next(r for g in yaml.safe_load((out / PLATFORM_FILE).read_text())["groups"]
                for r in g["rules"] if r.get("alert") == al.MODEL_NOT_READY
                and r["labels"].get("registry_entry") == model)
    url = render_template(rule["annotations"]["dashboard_url"],
                          {"model": model, "model_version": "1 2"}, 0)
    assert url == ("https://g.example.com/d?var-model=" + urllib.parse.quote_plus(model)
                   + "&var-v=1+2")
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(url).query) == {
        "var-model": [model], "var-v": ["1 2"]}


def test_a_thousand_registry_entries_give_rules_of_linear_size(tmp_path):
    """Were each FleetwatchModelNotReady rule to take away (``unless``) every earlier
    entry's names, 1000 entries would make a rule file of about 10 MB (and as large a
    PrometheusRule, far beyond what Kubernetes stores), quadratic in the entries. Only
    earlier entries that can match one of the entry's names are taken away — and those
    still are (first match wins)."""
    from fleetwatch.alerts.families.not_ready import not_ready_entries
    from fleetwatch.alerts.generate import OPERATOR_FILE, PLATFORM_FILE
    from fleetwatch.labels.registry import parse_registry

    models = [entry(f"model-{i:05d}-*") for i in range(1000)]
    out = generate(tmp_path, models)
    assert (out / PLATFORM_FILE).stat().st_size < 2_000_000
    assert (out / OPERATOR_FILE).stat().st_size < 2_000_000
    check_rules(out)

    reg = parse_registry({"models": [entry("llama-3-*"), entry("ranker"), entry("llama-*"),
                                     entry("*-canary"), entry("llama-3-8b"), entry("x[ab]y"),
                                     entry("xa?")]})
    earlier = {e.name: [x.name for x in xs] for e, xs in not_ready_entries(reg)}
    assert earlier == {"llama-3-*": [], "ranker": [], "llama-*": ["llama-3-*"],
                       "*-canary": ["llama-3-*", "llama-*"],
                       "llama-3-8b": ["llama-3-*", "llama-*"],
                       "x[ab]y": ["*-canary"],  # kept: "-canary" ends with "y" (cautious)
                       "xa?": ["*-canary", "x[ab]y"]}


def test_alertmanager_config_of_yaml_special_names_routes_by_team(tmp_path):
    """Coverage (no defect found): team and receiver names YAML would read as null, true
    or 0 stay strings; amtool accepts the file and routes pages and tickets by team."""
    from fleetwatch.alerts.generate import build_alertmanager_file

    hook = {"webhook_configs": [{"url": "http://127.0.0.1:1/x"}]}
    receivers = {"teams": {"null": {"page": "true", "ticket": "0"},
                           "a.b:c-d_E": {"page": "true", "ticket": "0"}},
                 "default": {"page": "p", "ticket": "t"},
                 "receivers": {"true": hook, "0": hook, "p": hook, "t": hook}}
    reg = write_yaml(tmp_path / "models.yaml", {"models": [entry(v, v) for v in HOSTILE]})
    rcv = write_yaml(tmp_path / "receivers.yaml", receivers)
    registry, slos, cfg = load_inputs(reg, None, rcv)
    text, am = build_alertmanager_file(registry, cfg, slos, ["x"])
    assert not any(w.startswith("team 'null'") for w in am.warnings)  # it has receivers
    assert "team 'a.b:c-d_E' in 'teams:' owns no model of the registry" in am.warnings
    path = tmp_path / "alertmanager.yml"
    path.write_text(text, encoding="utf-8")
    amtool = tool("amtool")
    res = run(amtool, "check-config", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    for labels, receiver in ((("team=null", "severity=page"), "true"),
                             (("team=null", "severity=ticket"), "0"),
                             (("team=a.b:c-d_E", "severity=ticket"), "0"),
                             (("team=other", "severity=page"), "p"),
                             (("team=other", "severity=ticket"), "t")):
        res = run(amtool, "config", "routes", "test", f"--config.file={path}", *labels)
        assert res.stdout.strip() == receiver, (labels, res.stdout, res.stderr)


# -- what the behaviour tests do not cover ------------------------------------------------------
def test_behaviour_tests_report_every_case_they_do_not_cover(tmp_path):
    """The generator dropped tiers (``continue``), the multiwindow test (``return None``)
    and registry entries without a testable name silently. Now each such case is a line on
    ``fleetwatch rules --tests``' stderr, and what is generated still passes promtool."""
    import sys

    reg = write_yaml(tmp_path / "models.yaml", {"models": [
        entry("[z-a]weird"), entry("llama-*"), entry("llama-3"), entry("*")]})
    # a 50 % objective: the largest possible burn is 2x, below every Workbook threshold
    slo = write_yaml(tmp_path / "slos.yaml", {"slos": [
        {**SLOS["slos"][0], "objectives": [{"target": 0.5}]}]})
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "fleetwatch.cli", "rules", "--registry",
                          str(reg), "--slos", str(slo), "--out", str(out), "--tests"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    prefix = "fleetwatch: warning: behaviour tests do not cover "
    assert res.stderr.splitlines() == [prefix + line for line in [
        "SLO avail, tier 1h/5m: threshold test: its threshold 14.4x can never be reached "
        "(the largest possible burn is 2x)",
        "SLO avail, tier 6h/30m: threshold test: its threshold 6x can never be reached "
        "(the largest possible burn is 2x)",
        "SLO avail, tier 1d/2h: threshold test: its threshold 3x can never be reached "
        "(the largest possible burn is 2x)",
        "SLO avail, tier 1h/5m: multiwindow test: a sustained burn of 1.1 times the "
        "threshold 14.4x is under one bad event per step or over all events",
        "FleetwatchModelNotReady of registry entry '[z-a]weird': its name glob matches no "
        "model name",
        "FleetwatchModelNotReady of registry entry 'llama-3': the example name 'llama-3' is "
        "taken by the earlier entry 'llama-*'",
        "FleetwatchModelNotReady of unregistered models: the example name "
        "'unregistered-model-z9' is registered (entry '*')"]]
    check_rules(out)
    res = run(tool("promtool"), "test", "rules", "fleetwatch.rules.test.yml", cwd=out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = yaml.safe_load((out / "fleetwatch.rules.test.yml").read_text())
    names = [t["name"] for t in doc["tests"]]
    assert "SLO avail, tier 3d/6h: burn just above and below 1x; regression inside the " \
           "envelope, overload only above it" in names  # the one reachable tier is tested
    assert not any("1h/5m" in n for n in names)


def test_the_golden_specs_are_covered_completely():
    """The golden inputs leave nothing out (an explicit expectation, not a silence)."""
    from fleetwatch.alerts.generate import build_rules
    from tests.support.helpers import GOLDEN, ROOT

    registry, slos, cfg = load_inputs(GOLDEN / "alerts" / "input" / "registry.yaml",
                                      GOLDEN / "alerts" / "input" / "slos.yaml",
                                      ROOT / "examples" / "receivers.yaml")
    assert slos is not None
    not_covered: list[str] = []
    build_rules(registry, slos, cfg, ["x"], tests=True, not_covered=not_covered)
    assert not_covered == []
