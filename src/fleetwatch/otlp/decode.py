"""Decoding OTLP/HTTP trace export bodies (``POST /v1/traces``) into
:class:`~fleetwatch.traces.spans.Span` values.

Both encodings of the OTLP/HTTP specification (opentelemetry-proto
``ExportTraceServiceRequest``): binary protobuf (``application/x-protobuf``, what vLLM's
Python exporter sends) and JSON (``application/json``, what Triton 2.51's C++ exporter
sends), each optionally ``Content-Encoding: gzip``. JSON is read with
``google.protobuf.json_format`` after the one deviation OTLP/JSON makes from the protobuf
JSON mapping: ``traceId``/``spanId``/``parentSpanId`` are hex, not base64.

Every body is bounded before it costs memory (:class:`Limits`): its size on the wire and
decompressed (a gzip bomb stops at the limit), and its span count — counted on the
protobuf wire format *before* parsing (an empty span is 2 bytes on the wire but hundreds
in memory) and bounded for JSON by the number of objects. A body that breaks a bound or
does not decode raises :class:`OTLPDecodeError` with a ``reason`` (the receiver's counter
label) and the HTTP status OTLP prescribes (400 bad data, 413 too large, 415 encoding).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from fleetwatch.exporters.capture import GzipError, gunzip
from fleetwatch.traces.spans import AttrValue, Span

#: Why a body was refused: the ``reason`` label of the receiver's counter.
REASONS = ("too_large", "too_many_spans", "bad_gzip", "bad_protobuf", "bad_json",
           "unsupported_media_type")


class OTLPDecodeError(ValueError):
    """A refused body: ``reason`` (one of :data:`REASONS`) and the HTTP ``status``."""

    def __init__(self, reason: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class Limits:
    """Bounds of one export body: ``max_body_bytes`` on the wire and decompressed
    (default 4 MiB: an SDK batch of 512 spans is ~0.3 MB), ``max_spans`` per body (default
    8192; the SDKs' batch processors export 512)."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_spans: int = 8192


def _gunzip(body: bytes, limit: int) -> bytes:
    try:
        return gunzip(body, limit)
    except GzipError as exc:
        if exc.reason == "too_large":
            raise OTLPDecodeError("too_large", f"decompressed body exceeds {limit} bytes",
                                  413) from None
        raise OTLPDecodeError("bad_gzip", f"gzip body does not decompress: {exc}"
                              if exc.reason == "corrupt" else "gzip body is truncated") from None


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise OTLPDecodeError("bad_protobuf", "truncated or malformed varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes, start: int, end: int, want: int,
            limit: int = 1 << 62) -> list[tuple[int, int]]:
    """``(start, end)`` of every length-delimited field number ``want`` in
    ``buf[start:end]`` (other fields skipped by wire type), at most ``limit``."""
    out: list[tuple[int, int]] = []
    i = start
    while i < end and len(out) < limit:
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            _, i = _varint(buf, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = _varint(buf, i)
            if num == want:
                out.append((i, i + n))
            i += n
        else:
            raise OTLPDecodeError("bad_protobuf", f"unsupported wire type {wt}")
        if i > end:
            raise OTLPDecodeError("bad_protobuf", "truncated protobuf body")
    return out


def count_protobuf_spans(body: bytes, stop_above: int) -> int:
    """Spans in a protobuf ``ExportTraceServiceRequest`` counted on the wire
    (resource_spans=1 → scope_spans=2 → spans=2), stopping once above ``stop_above``; more
    than ``stop_above`` resource or scope spans also count as above it."""
    count = containers = 0  # empty resource/scope spans cost memory too: bounded alike
    for rs in _fields(body, 0, len(body), 1, stop_above + 1):
        for ss in _fields(body, rs[0], rs[1], 2, stop_above + 1):
            containers += 1
            count += len(_fields(body, ss[0], ss[1], 2, stop_above + 1 - count))
            if count > stop_above or containers > stop_above:
                return stop_above + 1
        containers += 1
    return count if containers <= stop_above else stop_above + 1


def _hex_to_b64(obj: dict[str, Any], key: str) -> None:
    """OTLP/JSON ids are hex (not protobuf JSON's base64): convert, refuse anything else."""
    v = obj.get(key)
    if v is None or v == "":
        return
    try:
        if not isinstance(v, str):
            raise ValueError
        obj[key] = base64.b64encode(bytes.fromhex(v)).decode()
    except ValueError:
        raise OTLPDecodeError("bad_json", f"{key} {str(v)[:40]!r} is not hex") from None


def _json_request(text: bytes, limits: Limits) -> ExportTraceServiceRequest:
    if text.count(b"{") > limits.max_spans * 64:
        raise OTLPDecodeError("too_many_spans", "JSON body has too many objects", 413)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise OTLPDecodeError("bad_json", f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise OTLPDecodeError("bad_json", "body is not a JSON object")
    spans = 0
    try:
        for rs in data.get("resourceSpans") or ():
            for ss in rs.get("scopeSpans") or ():
                for sp in ss.get("spans") or ():
                    spans += 1
                    for k in ("traceId", "spanId", "parentSpanId"):
                        _hex_to_b64(sp, k)
                    for link in sp.get("links") or ():
                        _hex_to_b64(link, "traceId")
                        _hex_to_b64(link, "spanId")
    except (AttributeError, TypeError):
        raise OTLPDecodeError("bad_json", "body does not have the OTLP JSON structure "
                              "(resourceSpans[].scopeSpans[].spans[])") from None
    if spans > limits.max_spans:
        raise OTLPDecodeError("too_many_spans", f"{spans} spans exceed {limits.max_spans}", 413)
    req = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, req, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise OTLPDecodeError("bad_json", f"not an OTLP trace export: {exc}") from None
    return req


def decode_request(body: bytes, content_type: str = "application/x-protobuf",
                   content_encoding: str = "",
                   limits: Limits | None = None) -> ExportTraceServiceRequest:
    """Decode one export body; raises :class:`OTLPDecodeError`. ``content_type``
    ``application/json`` is JSON, ``application/x-protobuf`` (or ``application/protobuf``)
    protobuf; ``content_encoding`` ``gzip`` or empty/``identity``."""
    limits = limits or Limits()
    if len(body) > limits.max_body_bytes:
        raise OTLPDecodeError("too_large", f"body exceeds {limits.max_body_bytes} bytes", 413)
    enc = content_encoding.strip().lower()
    if enc in ("gzip", "x-gzip"):
        body = _gunzip(body, limits.max_body_bytes)
    elif enc not in ("", "identity"):
        raise OTLPDecodeError("unsupported_media_type",
                              f"Content-Encoding {content_encoding!r} is not supported", 415)
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == "application/json":
        return _json_request(body, limits)
    if ctype not in ("application/x-protobuf", "application/protobuf"):
        raise OTLPDecodeError("unsupported_media_type",
                              f"Content-Type {content_type!r} is not OTLP "
                              "(application/x-protobuf or application/json)", 415)
    n = count_protobuf_spans(body, limits.max_spans)
    if n > limits.max_spans:
        raise OTLPDecodeError("too_many_spans", f"more than {limits.max_spans} spans", 413)
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except DecodeError as exc:
        raise OTLPDecodeError("bad_protobuf", f"body is not an OTLP protobuf: {exc}") from None
    return req


def sniff_content_type(body: bytes) -> str:
    """For files without headers (``fleetwatch traces``): JSON when the first non-blank
    byte is ``{``, else protobuf (gzip is detected by its magic bytes elsewhere)."""
    return "application/json" if body.lstrip()[:1] == b"{" else "application/x-protobuf"


def _value(v: AnyValue) -> AttrValue:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        return v.double_value
    if which == "bool_value":
        return v.bool_value
    if which == "bytes_value":
        return binascii.hexlify(v.bytes_value).decode()
    return json_format.MessageToJson(v, indent=None) if which else ""


def _attrs(kvs: Any) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    kv: KeyValue
    for kv in kvs:
        out[kv.key] = _value(kv.value)
    return out


def iter_spans(req: ExportTraceServiceRequest) -> Iterator[Span]:
    """Every span of a decoded request, in the order sent, one at a time."""
    for rs in req.resource_spans:
        service = str(_attrs(rs.resource.attributes).get("service.name", ""))
        for ss in rs.scope_spans:
            scope = ss.scope.name
            for sp in ss.spans:
                yield Span(
                    trace_id=sp.trace_id.hex(), span_id=sp.span_id.hex(),
                    parent_span_id=sp.parent_span_id.hex(), name=sp.name, kind=sp.kind,
                    start_ns=sp.start_time_unix_nano, end_ns=sp.end_time_unix_nano,
                    attributes=_attrs(sp.attributes),
                    events=tuple((e.name, e.time_unix_nano) for e in sp.events),
                    service=service, scope=scope)


def spans_of(req: ExportTraceServiceRequest) -> list[Span]:
    """Every span of a decoded request, in the order sent."""
    return list(iter_spans(req))


def decode_spans(body: bytes, content_type: str = "", content_encoding: str = "",
                 limits: Limits | None = None) -> list[Span]:
    """:func:`decode_request` then :func:`spans_of`; an empty ``content_type`` is sniffed
    (:func:`sniff_content_type`) and gzip detected by its magic bytes."""
    if not content_encoding and body[:2] == b"\x1f\x8b":
        content_encoding = "gzip"
    probe = b""
    if not content_type:
        probe = _gunzip(body, (limits or Limits()).max_body_bytes) \
            if content_encoding == "gzip" else body
        content_type = sniff_content_type(probe)
    try:
        return spans_of(decode_request(body, content_type, content_encoding, limits))
    except OTLPDecodeError as exc:
        if probe and content_type == "application/x-protobuf" and _looks_like_text(probe):
            raise OTLPDecodeError(exc.reason, "text, but not OTLP JSON (it does not start "
                                  f"with '{{'); read as protobuf: {exc}", exc.status) from None
        raise


def _looks_like_text(data: bytes) -> bool:
    """True when the first 512 bytes are UTF-8 text (printable characters and blanks)."""
    try:
        head = data[:512].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\r\n" for c in head)
