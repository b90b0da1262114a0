"""``/metrics`` content coding: ``Accept-Encoding`` negotiation and gzip members.

The body is served as a concatenation of gzip members (RFC 1952 §2.2: "a gzip file
consists of a series of members"), one per cached piece: each normalized or
passed-through family is compressed once per scrape cycle, fleetwatch's own metrics per
request (they are small), the SLO engine's families once per engine update. Every gzip
reader Prometheus and curl use reads all members (Go's ``compress/gzip`` ``Reader`` is
multistream by default; Python's ``gzip.decompress`` and zlib's ``gunzip`` too), and the
decompressed bytes are those of the plain body.
"""

from __future__ import annotations

import gzip

#: zlib level of what is compressed once per scrape cycle or engine update: paid once,
#: read by every scrape, so the smaller body wins over the faster compression (level 6
#: costs a few times level 1's CPU for a body about a fifth smaller).
CACHED_LEVEL = 6
#: zlib level of what is compressed per request (fleetwatch's own metrics).
REQUEST_LEVEL = 1

_GZIP_NAMES = ("gzip", "x-gzip")


def gzip_member(data: bytes, level: int = CACHED_LEVEL) -> bytes:
    """``data`` as one gzip member (mtime 0: the same bytes give the same member); b""
    for no data (an empty member would be 20 bytes of nothing)."""
    return gzip.compress(data, compresslevel=level, mtime=0) if data else b""


def _qvalue(params: str) -> float | None:
    """The ``q`` of an ``Accept-Encoding`` element's parameters (1 when absent), or None
    when it is malformed (RFC 9110 §12.4.2: ``0`` to ``1``, at most three decimals)."""
    for param in params.split(";"):
        name, eq, value = param.partition("=")
        if name.strip().lower() != "q":
            continue
        value = value.strip()
        if not eq or not value or len(value) > 5 or value[0] not in "01" \
                or (len(value) > 1 and value[1] != "."):
            return None
        try:
            q = float(value)
        except ValueError:
            return None
        return q if 0.0 <= q <= 1.0 else None
    return 1.0


def wants_gzip(accept_encoding: str) -> bool:
    """Whether to answer gzip-coded under an ``Accept-Encoding`` header (RFC 9110
    §12.5.3): gzip (``gzip``, ``x-gzip``, or else ``*``) has a q-value above 0 and not
    below the one given to ``identity`` (``identity``, or else ``*``; not listed:
    below any coding listed). ``gzip;q=0`` and an absent or empty header give identity;
    malformed elements are ignored. When both are refused (``identity;q=0, gzip;q=0``)
    the answer is identity: a scraper gets a readable body rather than a 406."""
    gzip_q: float | None = None
    identity_q: float | None = None
    star_q: float | None = None
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = _qvalue(params)
        if q is None:
            continue
        if coding in _GZIP_NAMES:
            gzip_q = q if gzip_q is None else max(gzip_q, q)
        elif coding == "identity":
            identity_q = q
        elif coding == "*":
            star_q = q
    if gzip_q is None:
        gzip_q = star_q
    if identity_q is None:
        identity_q = star_q
    if not gzip_q:
        return False
    return identity_q is None or gzip_q >= identity_q
