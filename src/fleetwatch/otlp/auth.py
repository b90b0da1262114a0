"""Who may send spans to the OTLP receiver, and the bounds of its listener.

* :class:`BearerAuth`: with ``traces.auth.bearer_token_file``, a request without
  ``Authorization: Bearer <token>`` is answered 401 with ``WWW-Authenticate: Bearer`` and
  counted (``fleetwatch_traces_refused_bodies_total{trace_reason="unauthorized"}``); the
  token is compared in constant time (:func:`hmac.compare_digest`).
* :func:`server_tls`: with ``traces.auth.tls``, the receiver's TLS context, which requires
  a client certificate signed by ``client_ca_file`` (mutual TLS, Python's :mod:`ssl`).
* :class:`ListenGuard`: what the sidecar's connection guard offers a listener (a cap on
  open connections, a header timeout).

Files that cannot be read or used raise :class:`OTLPAuthError` naming the field, at start.
"""

from __future__ import annotations

import hmac
import json
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

from fleetwatch.otlp.config import TraceAuth

#: google.rpc.Code INVALID_ARGUMENT (OTLP: non-retryable bad data).
INVALID_ARGUMENT = 3

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status_body(message: str, json_body: bool) -> bytes:
    """A ``google.rpc.Status`` {code: INVALID_ARGUMENT, message} as protobuf or JSON (the
    two fields, hand-encoded: googleapis-common-protos is not a dependency)."""
    if json_body:
        return json.dumps({"code": INVALID_ARGUMENT, "message": message}).encode()
    msg = message.encode()[:4096]
    length, n = bytearray(), len(msg)
    while True:
        length.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    return bytes([0x08, INVALID_ARGUMENT, 0x12]) + bytes(length) + msg


class OTLPAuthError(RuntimeError):
    """``traces.auth`` names a file that cannot be read or used (token, certificate,
    key, CA); the message names the field and the file."""


class ListenGuard(Protocol):
    """The connection bounds the sidecar puts around a listener
    (:class:`fleetwatch.sidecar.guard.ConnectionGuard`): ``closed`` counts closures by
    reason, ``middleware`` marks requests, ``site`` listens through the guard."""

    @property
    def closed(self) -> Counter[str]: ...

    async def middleware(self, request: web.Request, handler: Handler
                         ) -> web.StreamResponse: ...

    def site(self, runner: web.BaseRunner, host: str, port: int,
             ssl_context: ssl.SSLContext | None = None) -> web.BaseSite: ...


class BearerAuth:
    """The bearer-token check (module docstring); ``token`` None lets every request
    through; refusals are counted in ``refused["unauthorized"]``."""

    def __init__(self, token: bytes | None, refused: Counter[str]) -> None:
        self.token = token
        self.refused = refused

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler
                         ) -> web.StreamResponse:
        """401 unless the request carries the token (see the class docstring)."""
        if self.token is not None:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" \
                    or not hmac.compare_digest(given.strip().encode(), self.token):
                self.refused["unauthorized"] += 1
                is_json = request.content_type == "application/json"
                return web.Response(
                    status=401, headers={"WWW-Authenticate": 'Bearer realm="otlp"'},
                    body=status_body("missing or wrong bearer token", is_json),
                    content_type="application/json" if is_json
                    else "application/x-protobuf")
        return await handler(request)


def read_token(auth: TraceAuth | None) -> bytes | None:
    """The bearer token of ``auth`` (the file's first line, stripped; None without a
    token file); :class:`OTLPAuthError` for an unreadable or empty file."""
    if auth is None or auth.bearer_token_file is None:
        return None
    path = auth.bearer_token_file
    try:
        with open(path, "rb") as fh:
            token = fh.read(65_536).strip()
    except OSError as exc:
        raise OTLPAuthError(f"field 'traces.auth.bearer_token_file': cannot read {path}: "
                            f"{exc.strerror or exc}") from None
    if not token or b"\n" in token:
        raise OTLPAuthError(f"field 'traces.auth.bearer_token_file': {path} must hold one "
                            "non-empty line, the token")
    return token


def server_tls(auth: TraceAuth | None) -> ssl.SSLContext | None:
    """The TLS context of ``auth.tls`` (client certificates required), None without
    ``tls``; :class:`OTLPAuthError` when a file cannot be loaded."""
    if auth is None or auth.tls is None:
        return None
    tls = auth.tls
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise OTLPAuthError(f"field 'traces.auth.tls': cannot load {tls.cert_file} / "
                            f"{tls.key_file}: {exc}") from None
    try:
        ctx.load_verify_locations(cafile=tls.client_ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise OTLPAuthError(f"field 'traces.auth.tls.client_ca_file': cannot load "
                            f"{tls.client_ca_file}: {exc}") from None
    return ctx


