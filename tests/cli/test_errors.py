"""The command line on bad input and runtime failures: one clean line, the right exit code
(2 bad input naming the file and field, 1 runtime failure), never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from fleetwatch.labels.schema import METRICS, SELF_METRICS

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
