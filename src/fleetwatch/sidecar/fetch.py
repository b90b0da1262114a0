"""Fetching one upstream ``/metrics`` body, whole or not at all.

The fetch asks for the text format 0.0.4 (which keeps vLLM's colons) and accepts
OpenMetrics and gzip. The whole body is read (however it is chunked or paced) within the
total timeout: a body cut short (connection closed, fewer bytes than its Content-Length, a
gzip stream without its end) is ``truncated``, never parsed as if complete; more than
``max_body_bytes`` (after decompression) is ``too_large``.
"""

from __future__ import annotations

import asyncio
import zlib

import aiohttp

ACCEPT = ("text/plain;version=0.0.4;q=1.0,application/openmetrics-text;version=1.0.0;q=0.5,"
          "*/*;q=0.1")


class ScrapeError(Exception):
    """A failed scrape; ``reason`` is the ``fleetwatch_upstream_scrape_errors_total`` label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def fetch_metrics(session: aiohttp.ClientSession, url: str, limit: int,
                        timeout_s: float) -> str:
    """The text of ``GET url`` (an upstream ``/metrics``).

    Raises :class:`ScrapeError` (its ``reason`` labels
    ``fleetwatch_upstream_scrape_errors_total``) unless the answer is HTTP 200 with a
    whole, UTF-8, non-HTML, non-empty body of at most ``limit`` bytes (decompressed)
    within the session's timeout (``timeout_s``, for the message). ``session`` must not
    decompress (``auto_decompress=False``): the body is decompressed here so that a gzip
    stream cut short is detected and ``limit`` bounds the decompressed size.
    """
    try:
        async with session.get(
                url, headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"}) as resp:
            if resp.status != 200:
                raise ScrapeError("http_status", f"HTTP {resp.status} from {url}")
            ctype = resp.headers.get("Content-Type", "")
            reader = _BodyReader(resp.headers.get("Content-Encoding", ""), limit, url)
            async for chunk in resp.content.iter_chunked(64 * 1024):
                reader.feed(chunk)
            body = reader.finish()
    except asyncio.TimeoutError:
        raise ScrapeError("timeout", f"no complete answer from {url} within "
                                     f"{timeout_s} s") from None
    except aiohttp.ClientPayloadError as exc:
        raise ScrapeError("truncated", f"{url}: body cut short "
                                       f"({_payload_problem(exc)})") from None
    except aiohttp.TooManyRedirects as exc:
        raise ScrapeError("connection", f"{url}: TooManyRedirects: gave up after "
                                        f"{len(exc.history)} redirects (a loop?), last "
                                        f"to {exc.request_info.real_url}") from None
    except aiohttp.ClientResponseError as exc:  # str() of these is not readable
        raise ScrapeError("connection", f"{url}: {type(exc).__name__}: "
                                        f"{exc.message or exc.status}") from None
    except aiohttp.ClientError as exc:
        raise ScrapeError("connection", f"{url}: {exc}") from None
    try:
        text = body.decode("utf-8-sig")  # a leading BOM is tolerated
    except UnicodeDecodeError as exc:
        raise ScrapeError("decode", f"body is not UTF-8 ({exc})") from None
    stripped = text.lstrip()
    if not stripped:
        raise ScrapeError("empty", f"empty body from {url}")
    if "html" in ctype or stripped[:1] == "<":
        raise ScrapeError("not_metrics", f"{url} returned an HTML page, not metrics")
    return text


class _BodyReader:
    """Accumulates a response body, decompressing gzip/deflate itself, up to ``limit``
    bytes of decompressed data (``too_large`` beyond); ``finish`` raises ``truncated``
    when a compressed stream ends before its end marker."""

    def __init__(self, encoding: str, limit: int, url: str) -> None:
        self.limit = limit
        self.url = url
        self.buf = bytearray()
        self._fed = False
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._z = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        else:
            raise ScrapeError("decode", f"{url}: unsupported Content-Encoding {encoding!r}")

    def _append(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > self.limit:
            raise ScrapeError("too_large", f"{self.url}: body larger than {self.limit} bytes")

    def feed(self, data: bytes) -> None:
        if self._z is None:
            self._append(data)
            return
        self._fed = self._fed or bool(data)
        try:
            while data:
                if self._z.eof:  # another gzip member follows (concatenated gzip is valid)
                    if not data.strip(b"\0 \t\r\n"):
                        return  # padding after the stream
                    self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)
                # max_length bounds the memory of a decompression bomb
                self._append(self._z.decompress(data, self.limit + 1 - len(self.buf)))
                data = self._z.unconsumed_tail or self._z.unused_data
        except zlib.error as exc:
            raise ScrapeError("decode", f"{self.url}: corrupt compressed body ({exc})") from None

    def finish(self) -> bytes:
        if self._z is not None and self._fed and not self._z.eof:
            raise ScrapeError("truncated", f"{self.url}: body cut short (compressed "
                                           "stream ends before its end)")
        return bytes(self.buf)


def _payload_problem(exc: aiohttp.ClientPayloadError) -> str:
    """The readable part of aiohttp's payload error (which wraps the parser's error)."""
    cause = exc.__cause__ or (exc.args[0] if exc.args else None)
    message = getattr(cause, "message", None)
    if isinstance(message, str) and message:
        return message
    return str(exc).replace("\n", " ").strip() or type(exc).__name__
