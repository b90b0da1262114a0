"""Reading a captured ``/metrics`` body from a file, as the offline commands
(``fleetwatch normalize``, ``fleetwatch slo replay``) take it.

A capture saved from a gzip scrape (``curl -H 'Accept-Encoding: gzip'``, a ``.prom.gz``)
starts with gzip's magic bytes ``1f 8b`` and is decompressed here — every member of it
(``cat a.gz b.gz`` is one valid gzip file, RFC 1952 §2.2), up to
:data:`MAX_CAPTURE_BYTES` decompressed in all; the text is UTF-8 (a leading BOM
tolerated, as the sidecar's scrape does); the offline commands check a file's size
against the same bound before reading it (:mod:`fleetwatch.commands.captures`).
:class:`CaptureError` says what is wrong, without the file name (the caller adds
it). :func:`gunzip` is the bounded one-shot decompression it uses, shared with the OTLP
receiver (:mod:`fleetwatch.otlp.decode`).
"""

from __future__ import annotations

import zlib

__all__ = ["MAX_CAPTURE_BYTES", "CaptureError", "GzipError", "capture_text", "gunzip"]

#: Bytes a capture may hold, as a file and decompressed: twice the sidecar's default
#: ``scrape.max_body_bytes`` (a 3000-model Triton body is 12 MB; the sidecar's
#: ``scrape.max_series`` of 250,000 series is about 40 MB of text).
MAX_CAPTURE_BYTES = 128 * 1024 * 1024

_GZIP_MAGIC = b"\x1f\x8b"


class CaptureError(ValueError):
    """A capture that is not gzip-or-plain UTF-8 text within the bound."""


class GzipError(ValueError):
    """A gzip stream :func:`gunzip` refuses; ``reason`` is ``corrupt`` (the message is
    zlib's), ``too_large`` or ``truncated``: the callers word it."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def gunzip(data: bytes, limit: int) -> bytes:
    """The decompressed bytes of the gzip stream ``data`` — every member of a
    multi-member stream, concatenated, as RFC 1952 and ``gzip -d`` read it; zero bytes
    after the last member are padding — at most ``limit`` of them in all (the memory of a
    decompression bomb is bounded by it).

    Raises:
        GzipError: not a valid gzip stream, or bytes after a member that start no other
            (``corrupt``), more than ``limit`` bytes decompressed (``too_large``), or a
            member that ends before its end (``truncated``).
    """
    parts: list[bytes] = []
    size = 0
    rest = data
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise GzipError("corrupt", str(exc)) from None
        size += len(out)
        if size > limit or d.unconsumed_tail:
            raise GzipError("too_large", f"more than {limit} bytes decompressed")
        if not d.eof:
            raise GzipError("truncated", "the stream ends before its end")
        parts.append(out)
        rest = d.unused_data
        if not rest.strip(b"\0"):
            return b"".join(parts)
        if rest[:2] != _GZIP_MAGIC:
            raise GzipError("corrupt", "bytes after a gzip member that start no other")


def capture_text(raw: bytes, limit: int = MAX_CAPTURE_BYTES) -> str:
    """The text of a capture's bytes ``raw``: gunzipped when it starts with gzip's magic
    bytes, then decoded as UTF-8.

    Raises:
        CaptureError: a broken or cut-short gzip stream, more than ``limit`` bytes (as
            given, or once decompressed), or bytes that are not UTF-8 (the message gives
            the offset).
    """
    gz = raw[:2] == _GZIP_MAGIC
    if not gz and len(raw) > limit:
        raise CaptureError(f"more than the {limit} bytes a capture may hold")
    if gz:
        try:
            raw = gunzip(raw, limit)
        except GzipError as exc:
            raise CaptureError({
                "corrupt": f"gzip-compressed, but not a valid gzip stream ({exc})",
                "too_large": f"gzip-compressed, more than {limit} bytes decompressed",
            }.get(exc.reason, "gzip-compressed, but the stream is cut short")) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        what = "decompressed text" if gz else "text"
        raise CaptureError(f"not UTF-8 {what} (byte {exc.start})") from None
