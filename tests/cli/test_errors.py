"""The command line on bad input and runtime failures: one clean line, the right exit code
(2 bad input naming the file and field, 1 runtime failure), never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from fleetwatch.labels.schema import METRICS, SELF_METRICS
from tests.support.helpers import ROOT

CLI = [sys.executable, "-m", "fleetwatch.cli"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def clean_failure(res: subprocess.CompletedProcess, code: int) -> str:
    """The error message of a run that failed with ``code`` without a traceback."""
    assert res.returncode == code, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("fleetwatch: error: ")]
    assert len(errors) == 1, res.stderr
    return res.stderr


def sidecar(tmp_path, listen: str = "", registry: str = ""):
    p = tmp_path / "sidecar.yaml"
    p.write_text(f"{listen}{registry}targets:\n  - {{name: a, url: 'http://127.0.0.1:9/metrics'}}\n")
    return p


def test_non_utf8_config(tmp_path):
    p = tmp_path / "sidecar.yaml"
    p.write_bytes(b"targets:\n  - {name: caf\xe9, url: 'http://x/m'}\n")
    for command in ("validate", "serve"):
        err = clean_failure(run(command, "--config", str(p)), 2)
        assert f"{p}: not UTF-8 text (byte 23)" in err


def test_non_utf8_registry_names_the_config_and_its_registry_field(tmp_path):
    (tmp_path / "models.yaml").write_bytes(b"models:\n  - {name: caf\xe9}\n")
    cfg = sidecar(tmp_path, registry="registry: models.yaml\n")
    err = clean_failure(run("validate", "--config", str(cfg)), 2)
    assert f"{cfg}: registry: {tmp_path / 'models.yaml'}: not UTF-8 text (byte 22)" in err


def test_missing_registry_names_the_config_and_its_registry_field(tmp_path):
    cfg = sidecar(tmp_path, registry="registry: models.yaml\n")
    for command in ("validate", "serve"):
        err = clean_failure(run(command, "--config", str(cfg)), 2)
        assert (f"{cfg}: registry: {tmp_path / 'models.yaml'}: cannot read registry: "
                "No such file or directory") in err


def test_invalid_registry_names_the_config_and_its_registry_field(tmp_path):
    (tmp_path / "models.yaml").write_text("- {name: a, team: t, owner: o, oncall: c}\n")
    cfg = sidecar(tmp_path, registry="registry: models.yaml\n")
    err = clean_failure(run("validate", "--config", str(cfg)), 2)
    assert (f"{cfg}: registry: {tmp_path / 'models.yaml'}: expected a mapping with a "
            "'models:' list") in err
    assert "_RegistryFile" not in err


@pytest.mark.parametrize("address", ["not a host", "999.1.2.3", "[::1]", "-bad-"])
def test_validate_rejects_an_address_that_is_neither_ip_nor_host_name(tmp_path, address):
    cfg = sidecar(tmp_path, listen=f"listen: {{address: '{address}', port: 0}}\n")
    err = clean_failure(run("validate", "--config", str(cfg)), 2)
    assert f"{cfg}: listen.address:" in err


def test_serve_when_the_port_is_in_use(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = sidecar(tmp_path, listen=f"listen: {{address: 127.0.0.1, port: {port}}}\n")
        err = clean_failure(run("serve", "--config", str(cfg)), 1)
    assert (f"fleetwatch: error: cannot listen on 127.0.0.1:{port}: Address already in use "
            f"(listen: in {cfg})\n") == err


def test_serve_when_the_listen_host_does_not_resolve(tmp_path):
    cfg = sidecar(tmp_path, listen="listen: {address: fleetwatch-test.invalid, port: 0}\n")
    assert run("validate", "--config", str(cfg)).returncode == 0  # a plausible name
    err = clean_failure(run("serve", "--config", str(cfg)), 1)
    assert "fleetwatch: error: cannot listen on fleetwatch-test.invalid:0: " in err
    assert f"(listen: in {cfg})" in err


def test_schema_piped_shows_full_names():
    res = subprocess.run([*CLI, "schema"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "80", "TERM": "dumb"})
    assert res.returncode == 0, res.stderr
    cells = {c.strip() for line in res.stdout.splitlines() for c in line.split("│")}
    missing = [m.name for m in METRICS + SELF_METRICS if m.name not in cells]
    assert not missing


def test_capture_text_bounds_and_names_what_is_wrong():
    import gzip

    from fleetwatch.exporters.capture import CaptureError, capture_text

    body = "# TYPE a counter\na 1\n"
    assert capture_text(body.encode()) == body
    assert capture_text(b"\xef\xbb\xbf" + body.encode()) == body  # a BOM, as a scrape
    assert capture_text(gzip.compress(body.encode())) == body
    with pytest.raises(CaptureError, match=r"more than 100 bytes decompressed"):
        capture_text(gzip.compress(b"a 1\n" * 1000), limit=100)  # a gzip bomb, bounded
    with pytest.raises(CaptureError, match=r"not a valid gzip stream"):
        capture_text(b"\x1f\x8b" + b"\x00" * 30)
    with pytest.raises(CaptureError, match=r"not UTF-8 decompressed text \(byte 0\)"):
        capture_text(gzip.compress(b"\xff\xfe"))


EXAMPLES = str(ROOT / "examples")
GENERATORS = {
    "rules": ["--registry", f"{EXAMPLES}/models.yaml", "--slos", f"{EXAMPLES}/slos.yaml"],
    "dashboards": ["--registry", f"{EXAMPLES}/models.yaml", "--slos", f"{EXAMPLES}/slos.yaml"],
    "manifests": [*(arg for name in ("sidecar", "sidecar-vllm", "sidecar-vllm-prefill",
                                     "sidecar-vllm-decode")
                    for arg in ("--config", f"{EXAMPLES}/{name}.yaml")),
                  "--registry", f"{EXAMPLES}/models.yaml", "--slos", f"{EXAMPLES}/slos.yaml"],
}


@pytest.mark.parametrize("command", sorted(GENERATORS))
def test_generators_report_alike_and_an_out_that_is_a_file_is_exit_1(tmp_path, command):
    """Each folder generator says ``wrote N files to DIR`` (N the files in DIR); an --out
    that is an existing file is a runtime failure naming it (exit 1), as the README says."""
    from click.testing import CliRunner

    from fleetwatch.cli import main

    out = tmp_path / "out"
    res = CliRunner().invoke(main, [command, *GENERATORS[command], "--out", str(out)])
    assert res.exit_code == 0, res.output
    written = [p for p in out.rglob("*") if p.is_file()]
    assert res.stdout == f"wrote {len(written)} files to {out}\n"
    taken = tmp_path / "taken"
    taken.write_text("not a folder\n")
    res = run(command, *GENERATORS[command], "--out", str(taken))
    assert clean_failure(res, 1).splitlines()[-1] == (
        f"fleetwatch: error: {taken}: cannot write: not a directory")
    assert taken.read_text() == "not a folder\n"


def test_demo_without_the_triton_extra_is_one_line_of_advice():
    """``pip install .`` without the triton extra: the demo says what to install in one
    line and exits 1 before any server starts (no traceback)."""
    hide = ("import sys; sys.modules['pytriton'] = None; from fleetwatch.cli import main; "
            "main()")
    res = subprocess.run([sys.executable, "-c", hide, "demo", "--duration", "1", "--port",
                          "0"], capture_output=True, text=True, timeout=60)
    assert clean_failure(res, 1).splitlines() == [
        "fleetwatch: error: the 'pytriton' package is not installed; install the 'triton' "
        "extra (pip install '.[triton]' from a clone, which pins nvidia-pytriton==0.7.0, "
        "or ./dev demo)"]
    assert res.stdout == ""


def test_an_output_file_that_is_a_directory_is_exit_1_naming_it(tmp_path):
    """--out and --html name files: a directory there is an output that cannot be written
    (exit 1, one line naming it), not click's usage error (exit 2)."""


    captures = [str(p) for p in sorted(
        (ROOT / "tests" / "data" / "vllm-sweep" / "captures").glob("*.prom"))[:3]]
    slos = tmp_path / "slos.yaml"
    slos.write_text("slos:\n  - name: avail\n    selector: {models: [tiny-llm]}\n"
                    "    sli: {availability: {}}\n    objectives: [{target: 0.99}]\n"
                    "    timeWindow: [{duration: 30d}]\n    concurrency: {envelope: 8}\n")
    d = tmp_path / "a-directory"
    d.mkdir()
    for args in (
        ["alertmanager", "--registry", f"{EXAMPLES}/models.yaml", "--receivers",
         f"{EXAMPLES}/receivers.yaml", "--out", str(d)],
        ["slo", "replay", "--slos", str(slos), "--html", str(d), *captures],
        ["baseline", "record", "--model", "tiny-llm", "--slos", str(slos), "--version", "",
         *(a for c in captures for a in ("--captures", c)), "--out", str(d)],
    ):
        err = clean_failure(run(*args), 1)
        line = next(x for x in err.splitlines() if x.startswith("fleetwatch: error: "))
        assert str(d) in line and "cannot write" in line, (args[0], err)


VLLM_CAPTURE = ROOT / "tests/fixtures/expositions/vllm/v0.32.0-cpu-real-engine-tiny-llm-under-load.prom"


@pytest.mark.parametrize("source", ["triton", "dcgm", "sglang"])
def test_normalize_with_another_source_than_the_capture_is_exit_2_naming_the_right_one(source):
    """A vLLM capture normalized as another source gives no series: one error line that
    names the source it looks like, whether the wrong table refused samples (Triton's
    per-model rules refuse vLLM's lines for lack of a ``model`` label) or not."""
    res = run("normalize", "--source", source, str(VLLM_CAPTURE))
    assert res.stdout == ""
    assert f"no {source} series in this exposition (it looks like vllm: --source vllm)" \
        in clean_failure(res, 2)
    ok = run("normalize", "--source", "vllm", str(VLLM_CAPTURE))
    assert ok.returncode == 0 and "modelserver_requests_active" in ok.stdout


def test_receivers_without_default_name_their_file(tmp_path):
    receivers = tmp_path / "receivers.yaml"
    receivers.write_text("teams: {}\n")
    res = run("alertmanager", "--registry", f"{EXAMPLES}/models.yaml", "--receivers",
              str(receivers))
    (line,) = clean_failure(res, 2).splitlines()
    assert line.startswith(f"fleetwatch: error: {receivers}: ") and "'default:" in line, line


@pytest.mark.parametrize("command", ["rules", "alertmanager"])
def test_an_empty_receivers_file_is_exit_2_naming_it(tmp_path, command):
    receivers = tmp_path / "receivers.yaml"
    receivers.write_text("# nothing yet\n")
    args = {"rules": ["--slos", f"{EXAMPLES}/slos.yaml", "--out", str(tmp_path / "rules")],
            "alertmanager": []}
    res = run(command, "--registry", f"{EXAMPLES}/models.yaml", "--receivers", str(receivers),
              *args[command])
    (line,) = clean_failure(res, 2).splitlines()
    assert line == (f"fleetwatch: error: {receivers}: empty: an alerting configuration names "
                    "the receivers (default:, teams:, …; examples/receivers.yaml, "
                    "docs/alerts.md)"), line
    assert not (tmp_path / "rules").exists()
