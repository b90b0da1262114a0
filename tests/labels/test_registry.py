"""Registry and sidecar configuration: strict validation with errors naming file and field."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleetwatch.labels.registry import RegistryError, load_registry
from fleetwatch.sidecar.config import ConfigError, load_config
from tests.support.helpers import ROOT


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_registry_lookup_first_match_and_globs():
    reg = load_registry(ROOT / "tests" / "data" / "registry.yaml")
    assert reg.lookup("ranker", "2").description.startswith("Canary")
    assert reg.lookup("ranker", "1").description == ""
    assert reg.lookup("tiny-llm", "").team == "genai"
    assert reg.lookup("nobody", "1") is None
    line = reg.info_lines([("ranker", "2", "triton", "python")])[0]
    assert line == ('modelserver_model_info{model="ranker",model_version="2",backend="triton",'
                    'runtime="python",team="search",owner="alice@example.com",'
                    'oncall="search-oncall",latency_tier="interactive",engine_version="",'
                    'quantization=""} 1')


@pytest.mark.parametrize("body,expected", [
    ("models:\n  - name: a\n    team: t\n    oncall: o\n", "models[0] (name 'a'): field 'owner': Field required"),
    ("models:\n  - name: a\n    team: t\n    owner: x\n    oncall: o\n    colour: red\n",
     "models[0] (name 'a'): field 'colour': unknown field"),
    ("models:\n  - {name: a, team: t, owner: '', oncall: o}\n", "field 'owner'"),
    ("models: [\n", "not valid YAML"),
    ("", "empty registry"),
    ("teams: []\n", "field 'models'"),
    ("models:\n  - {name: a, version: true, team: t, owner: o, oncall: c}\n",
     "models[0] (name 'a'): field 'version': true is a boolean, not a version; "
     'quote it, e.g. version: "1"'),
    ("models:\n  - {name: a, version: 1.0, team: t, owner: o, oncall: c}\n",
     "models[0] (name 'a'): field 'version': read as the number 1.0, not text; "
     'quote it, e.g. version: "1"'),
    ("models:\n  - {name: a, team: t, owner: o, oncall: c, latency_tier: ''}\n",
     "models[0] (name 'a'): field 'latency_tier': String should have at least 1 character"),
    ("models:\n  - {name: a, team: t, owner: o, oncall: c}\n"
     "  - {name: b, team: t, owner: o, oncall: c}\n  - {name: a, team: u, owner: o, oncall: c}\n",
     "models[2] (name 'a', any version): duplicate of models[0]; the first match wins, "
     "so models[2] would never be used"),
    ("models:\n  - {name: a, version: 010, team: t, owner: o, oncall: c}\n",
     "models[0] (name 'a'): field 'version': read as the number 8, not text; "
     'quote it, e.g. version: "1"'),
    ("models:\n  - {name: a, version: 2, team: t, owner: o, oncall: c}\n",
     "models[0] (name 'a'): field 'version': read as the number 2, not text"),
    ("models:\n  - {name: a, version: '2', team: t, owner: o, oncall: c}\n"
     "  - {name: a, version: '2', team: u, owner: o, oncall: c}\n",
     "models[1] (name 'a', version '2'): duplicate of models[0]"),
    ("- {name: a, team: t, owner: o, oncall: c}\n",
     "expected a mapping with a 'models:' list, not a list"),
    ("just text\n", "expected a mapping with a 'models:' list, not text"),
    ("models: [a]\n", "models[0]: expected a mapping with name, team, owner and oncall"),
])
def test_registry_errors_name_file_entry_field(tmp_path, body, expected):
    p = write(tmp_path, "reg.yaml", body)
    with pytest.raises(RegistryError) as err:
        load_registry(p)
    assert str(p) in str(err.value)
    assert expected in str(err.value)
    for internal in ("_RegistryFile", "ModelEntry", "(entry)"):  # no internal names
        assert internal not in str(err.value)


def test_a_yaml_syntax_error_is_one_line_naming_the_file_line_and_column(tmp_path):
    p = write(tmp_path, "reg.yaml", "models:\n  - name: a\n    team: [t\n")
    with pytest.raises(RegistryError) as err:
        load_registry(p)
    assert str(err.value) == (
        f"{p}: not valid YAML: line 4, column 1: expected ',' or ']', but got "
        "'<stream end>' (while parsing a flow sequence at line 3, column 11)")


def test_registry_same_name_other_version_is_not_a_duplicate(tmp_path):
    reg = load_registry(write(tmp_path, "reg.yaml",
                              "models:\n  - {name: a, version: '2', team: t, owner: o, oncall: c}\n"
                              "  - {name: a, team: u, owner: o, oncall: c}\n"))
    assert reg.lookup("a", "2").team == "t" and reg.lookup("a", "1").team == "u"


def test_non_utf8_registry_is_a_clean_error(tmp_path):
    p = tmp_path / "reg.yaml"
    p.write_bytes(b"models:\n  - {name: caf\xe9, team: t, owner: o, oncall: c}\n")
    with pytest.raises(RegistryError) as err:
        load_registry(p)
    assert str(err.value) == f"{p}: not UTF-8 text (byte 22): cannot read registry"


@pytest.mark.parametrize("body,expected", [
    ("targets: []\n", "targets: List should have at least 1 item"),
    ("targets:\n  - {name: a, url: 'http://x/metrics', kind: tgi}\n",
     "targets[0].kind: unknown kind 'tgi'; expected one of auto, "),
    ("targets:\n  - {name: a}\n", "targets[0].url: Field required"),
    ("targets:\n  - {name: a, url: 'not a url'}\n",
     "targets[0].url: not a valid URL (relative URL without a base)"),
    ("targets:\n  - {name: a, url: 'http://x/m'}\n  - {name: a, url: 'http://y/m'}\n",
     "repeated: a"),
    ("scrape: {interval_seconds: 1, timeout_seconds: 5}\ntargets:\n  - {name: a, url: 'http://x/m'}\n",
     "scrape: timeout_seconds must not exceed interval_seconds"),
    ("listen: {port: 70000}\ntargets:\n  - {name: a, url: 'http://x/m'}\n", "listen.port"),
    ("targets:\n  - {name: a, url: 'http://x/m', colour: red}\n", "targets[0].colour: unknown field"),
    # two targets that could export the same series
    ("targets:\n  - {name: t1, kind: triton, url: 'http://x/m'}\n"
     "  - {name: t2, kind: triton, url: 'http://y/m'}\n",
     "targets[1].labels: targets 't1' (targets[0]) and 't2' (targets[1]) have kind triton and "
     "the same labels {}, so their series could collide; give each a distinct labels: mapping, "
     "e.g. labels: {server: t2}"),
    ("targets:\n  - {name: t1, kind: vllm, url: 'http://x/m', labels: {server: a}}\n"
     "  - {name: g, kind: dcgm, url: 'http://z/m'}\n"
     "  - {name: t2, url: 'http://y/m', labels: {server: a}}\n",
     "targets[2].labels: targets 't1' (targets[0]) and 't2' (targets[2]) have kind vllm and auto "
     "and the same labels {server: a}"),
    ("targets:\n  - {name: a, url: 'http://x/m'}\n  - {name: b, url: 'http://y/m'}\n",
     "targets 'a' (targets[0]) and 'b' (targets[1]) have kind auto"),
    # listen address: an IP or a plausible host name
    ("listen: {address: 'not a host'}\ntargets:\n  - {name: a, url: 'http://x/m'}\n",
     "listen.address: 'not a host' is neither an IP address nor a host name"),
    ("listen: {address: '999.1.2.3'}\ntargets:\n  - {name: a, url: 'http://x/m'}\n",
     "listen.address"),
    ("listen: {address: '[::1]'}\ntargets:\n  - {name: a, url: 'http://x/m'}\n",
     "IPv6 without brackets"),
])
def test_config_errors_name_file_and_field(tmp_path, body, expected):
    p = write(tmp_path, "sidecar.yaml", body)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert str(p) in str(err.value)
    assert expected in str(err.value)


def test_validate_cli_exit_codes(tmp_path):
    reg = write(tmp_path, "reg.yaml", "models:\n  - {name: a, team: t, owner: o, oncall: c}\n")
    good = write(tmp_path, "ok.yaml",
                 f"registry: {reg.name}\ntargets:\n  - {{name: a, url: 'http://127.0.0.1:1/metrics'}}\n")
    bad_reg = write(tmp_path, "badreg.yaml", "models:\n  - {name: a}\n")
    bad = write(tmp_path, "bad.yaml",
                f"registry: {bad_reg.name}\ntargets:\n  - {{name: a, url: 'http://h/m'}}\n")
    cli = [sys.executable, "-m", "fleetwatch.cli", "validate", "--config"]
    ok = subprocess.run([*cli, str(good)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "1 registry entry)" in ok.stdout
    ko = subprocess.run([*cli, str(bad)], capture_output=True, text=True)
    assert ko.returncode == 2
    assert f"{bad_reg}: models[0] (name 'a'): field 'team': Field required" in ko.stderr


def test_normalize_cli_on_unreadable_input(tmp_path):
    cli = [sys.executable, "-m", "fleetwatch.cli", "normalize"]
    missing = subprocess.run([*cli, str(tmp_path / "nope.prom")], capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    binary = write(tmp_path, "b.prom", "")
    binary.write_bytes(b"\xff\xfe\x00garbage")
    res = subprocess.run([*cli, str(binary)], capture_output=True, text=True)
    assert res.returncode == 2 and "not UTF-8" in res.stderr
    html = write(tmp_path, "h.prom", "<!doctype html><html></html>")
    res = subprocess.run([*cli, str(html)], capture_output=True, text=True)
    assert res.returncode == 2 and "HTML" in res.stderr
    garbage = write(tmp_path, "g.prom", "this is not\nan exposition at all {\n")
    res = subprocess.run([*cli, str(garbage)], capture_output=True, text=True)
    assert res.returncode == 2 and "no Prometheus metric lines" in res.stderr
    # one error line, not the summary of an exposition that is none
    assert res.stderr.strip().splitlines() == [res.stderr.strip()], res.stderr
    assert res.stdout == ""


def test_normalize_cli_reads_a_gzip_capture_as_its_text(tmp_path):
    import gzip

    from tests.support.helpers import fixture_files

    cli = [sys.executable, "-m", "fleetwatch.cli", "normalize"]
    src = next(p for p in fixture_files() if "triton" in p.parts[-2])
    plain = subprocess.run([*cli, str(src)], capture_output=True, text=True)
    packed = tmp_path / "c.prom.gz"
    packed.write_bytes(gzip.compress(src.read_bytes()))
    unpacked = subprocess.run([*cli, str(packed)], capture_output=True, text=True)
    assert plain.returncode == unpacked.returncode == 0, unpacked.stderr
    assert unpacked.stdout == plain.stdout and "modelserver_" in plain.stdout
    cut = tmp_path / "cut.prom.gz"
    cut.write_bytes(packed.read_bytes()[:-20])
    res = subprocess.run([*cli, str(cut)], capture_output=True, text=True)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (f"fleetwatch: error: {cut}: gzip-compressed, but the stream is "
                          "cut short: not a Prometheus exposition\n")


@pytest.mark.parametrize("body,address,targets", [
    ("targets:\n  - {name: t1, kind: triton, url: 'http://x/m', labels: {server: a}}\n"
     "  - {name: t2, kind: triton, url: 'http://y/m', labels: {server: b}}\n",
     "0.0.0.0", [("t1", "triton", {"server": "a"}), ("t2", "triton", {"server": "b"})]),
    ("targets:\n  - {name: t, kind: triton, url: 'http://x/m'}\n"
     "  - {name: v, kind: vllm, url: 'http://y/m'}\n  - {name: g, kind: dcgm, url: 'http://z/m'}\n",
     "0.0.0.0", [("t", "triton", {}), ("v", "vllm", {}), ("g", "dcgm", {})]),
    ("targets:\n  - {name: s, kind: sglang, url: 'http://x:30000/metrics'}\n",
     "0.0.0.0", [("s", "sglang", {})]),
    ("listen: {address: '::'}\ntargets:\n  - {name: a, url: 'http://x/m'}\n",
     "::", [("a", "auto", {})]),
    ("listen: {address: node-1.example.com}\ntargets:\n  - {name: a, url: 'http://x/m'}\n",
     "node-1.example.com", [("a", "auto", {})]),
])
def test_config_accepts_distinct_targets_and_addresses(tmp_path, body, address, targets):
    cfg = load_config(write(tmp_path, "sidecar.yaml", body))
    assert cfg.listen.address == address
    assert [(t.name, t.kind, t.labels) for t in cfg.targets] == targets


def test_non_utf8_config_is_a_clean_error(tmp_path):
    p = tmp_path / "sidecar.yaml"
    p.write_bytes(b"targets:\n  - {name: caf\xe9, url: 'http://x/m'}\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert str(err.value) == f"{p}: not UTF-8 text (byte 23): cannot read configuration"
