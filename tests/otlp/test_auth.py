"""The OTLP receiver off loopback (issue 25): refused without authentication in the
configuration, a bearer token required when configured (401 and counted otherwise), and
mutual TLS with certificates made by the openssl command line."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.otlp.auth import OTLPAuthError
from fleetwatch.otlp.config import TracesConfig
from fleetwatch.otlp.receiver import TraceReceiver, receiver_metrics, run_receiver
from fleetwatch.sidecar.config import ConfigError, parse_config
from fleetwatch.sidecar.guard import ConnectionGuard
from tests.support.helpers import _free_port
from tests.support.trace_helpers import T0, ReceiverThread, body, triton_request

TARGETS = [{"name": "t", "kind": "triton", "url": "http://127.0.0.1:8002/metrics"}]


def _post(url: str, headers: dict[str, str], context: ssl.SSLContext | None = None
          ) -> int:
    """POST one Triton request's spans, dated now (the receiver's clock bounds them)."""
    data = body(triton_request(1, start_ms=int((time.time() - T0) * 1000)))
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/x-protobuf", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("address", ["0.0.0.0", "10.1.2.3", "::", "fleetwatch.example"])
def test_a_non_loopback_listen_address_without_auth_is_refused(address: str) -> None:
    with pytest.raises(ConfigError, match=r"traces\.listen\.address .* is not loopback"):
        parse_config({"targets": TARGETS, "traces": {"listen": {"address": address}}},
                     "sidecar.yaml")
    for ok in ("127.0.0.1", "127.3.4.5", "::1", "localhost"):
        parse_config({"targets": TARGETS, "traces": {"listen": {"address": ok}}})
    parse_config({"targets": TARGETS, "traces": {"listen": {"address": address},
                                            "auth": {"bearer_token_file": "/t"}}})


def test_serve_exits_naming_the_file_and_field_for_an_exposed_receiver(tmp_path) -> None:
    cfg = tmp_path / "sidecar.yaml"
    cfg.write_text("targets: [{name: t, kind: triton, url: 'http://127.0.0.1:8002/metrics'}]"
                   "\ntraces: {listen: {address: 0.0.0.0}}\n")
    r = CliRunner().invoke(main, ["serve", "--config", str(cfg)])
    assert r.exit_code == 2
    assert f"{cfg}" in r.stderr and "traces.listen.address" in r.stderr


def test_serve_exits_1_naming_the_field_for_a_token_file_it_cannot_read(tmp_path) -> None:
    cfg = tmp_path / "sidecar.yaml"
    cfg.write_text("listen: {address: 127.0.0.1, port: 0}\n"
                   "targets: [{name: t, kind: triton, required: false, "
                   "url: 'http://127.0.0.1:8002/metrics'}]\n"
                   "traces: {listen: {address: 0.0.0.0, port: 0}, "
                   f"auth: {{bearer_token_file: {tmp_path / 'none'}}}}}\n")
    r = CliRunner().invoke(main, ["serve", "--config", str(cfg)])
    assert r.exit_code == 1
    assert (f"{cfg}: field 'traces.auth.bearer_token_file': cannot read {tmp_path / 'none'}"
            in r.stderr)


def test_a_bearer_token_is_required_when_configured(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    rec = TraceReceiver(TracesConfig(auth={"bearer_token_file": str(token)}))
    with ReceiverThread(rec) as rt:
        assert _post(rt.url, {}) == 401
        assert _post(rt.url, {"Authorization": "Bearer wrong"}) == 401
        assert _post(rt.url, {"Authorization": "Basic s3cret-token"}) == 401
        assert _post(rt.url, {"Authorization": "Bearer s3cret-token"}) == 200
        assert rec.joiner.stats.spans == 3  # only the authenticated body's spans
    text = receiver_metrics(rec)().decode()
    assert 'fleetwatch_traces_refused_bodies_total{trace_reason="unauthorized"} 3.0' in text


def test_an_unreadable_or_empty_token_file_is_an_error_naming_the_field(tmp_path) -> None:
    with pytest.raises(OTLPAuthError, match=r"traces\.auth\.bearer_token_file.*cannot read"):
        TraceReceiver(TracesConfig(auth={"bearer_token_file": str(tmp_path / "none")}))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(OTLPAuthError, match="one non-empty line"):
        TraceReceiver(TracesConfig(auth={"bearer_token_file": str(tmp_path / "empty")}))


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _pki(d: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, signed by it."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=test-ca", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                 "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"))
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt"),
                 "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
                 "-extfile", str(d / "san.ext"), "-out", str(d / f"{name}.crt"))


def test_mutual_tls_requires_a_client_certificate_signed_by_the_ca(tmp_path) -> None:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command line is needed to make the test certificates")
    _pki(tmp_path)
    port = _free_port()
    cfg = TracesConfig(listen={"address": "127.0.0.1", "port": port}, settle_seconds=0,
                       auth={"tls": {"cert_file": str(tmp_path / "server.crt"),
                                     "key_file": str(tmp_path / "server.key"),
                                     "client_ca_file": str(tmp_path / "ca.crt")}})
    rec = TraceReceiver(cfg)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    ready = threading.Event()
    thread = threading.Thread(target=loop.run_until_complete, daemon=True, args=(
        run_receiver(rec, stop, on_ready=lambda _p: ready.set(),
                     guard=ConnectionGuard(16, 10.0)),))  # through the sidecar's guard
    thread.start()
    try:
        assert ready.wait(30)
        url = f"https://127.0.0.1:{port}/v1/traces"
        with_cert = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        with_cert.load_cert_chain(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
        assert _post(url, {}, with_cert) == 200
        without = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _post(url, {}, without)
        assert rec.joiner.stats.spans == 3
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
    with pytest.raises(OTLPAuthError, match=r"traces\.auth\.tls"):
        TraceReceiver(TracesConfig(auth={"tls": {
            "cert_file": str(tmp_path / "ca.key"), "key_file": str(tmp_path / "none"),
            "client_ca_file": str(tmp_path / "ca.crt")}}))
