"""What ``/metrics`` serves: every part merged by one assembler, no family twice.

Parts, in precedence order (:data:`fleetwatch.exporters.assemble.PRECEDENCE`): the
normalized families of the last scrape cycle, fleetwatch's own metrics (upstream health,
``process_*``), the SLO engine's families (a callable the SLO routes give, returning
text-format bytes), and the upstream families passed through. A family or series a part
of higher precedence served already is dropped and counted in
``fleetwatch_exposition_dropped_series_total{origin}`` (the count a body shows is that of
the assemblies before it), so ``/metrics`` never carries a second HELP/TYPE for a name nor
a series twice — what ``promtool check metrics`` and Prometheus' parser require.

The body is assembled segment by segment (:class:`~fleetwatch.exporters.assemble.Merger`),
each segment's text and gzip member (:mod:`.encoding`) made once and reused while what it
depends on is unchanged: the normalized and passed-through families are encoded by the
scraper once per cycle (:attr:`~.scraper.Scraper.encoded`), the SLO engine's families once
per engine body, and only fleetwatch's own metrics (current values: ``process_*``, the
dropped-series counts) per request. Segments are cached under the names the segments
before them serve, so the result is byte for byte what :func:`assemble` gives for the
whole body. The SLO engine's segment is made again after every engine update, and its
size grows with the models the engine holds (10,000 models: about a second of parsing,
merging and compressing): :meth:`MetricsAssembler.encode_async` makes it in a worker
thread, so that ``/healthz`` and the other routes keep being served meanwhile.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import generate_latest

from fleetwatch.exporters.assemble import (
    NORMALIZED,
    SELF,
    SLO,
    Family,
    Merger,
    Owners,
    Part,
    assemble,
    claims,
    owners_signature,
    parse_families,
)
from fleetwatch.sidecar.encoding import CACHED_LEVEL, REQUEST_LEVEL, gzip_member
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.selfmetrics import self_registry


@dataclass
class _Segment:
    """One assembled segment: its ``families``, their gzip members, the series it dropped,
    the names served after it; ``key`` and ``source`` (what it was made from, kept so
    that the ids in ``key`` stay its own) decide whether it can be reused. The plain text
    is made on the first plain request (most scrapers ask gzip: no 8 MB kept for none)."""

    key: object
    source: object
    families: list[Family]
    gz: bytes
    dropped: Counter[str]
    owners: Owners
    _plain: bytes | None = None

    @property
    def plain(self) -> bytes:
        if self._plain is None:
            self._plain = b"".join(f.text().encode() for f in self.families)
        return self._plain


def _segment(key: object, source: object, part: Part, owners: Owners,
             encoded: dict[int, tuple[Family, bytes]], level: int) -> _Segment:
    """Merge ``part`` after the names ``owners`` serves; a family merged unchanged whose
    encoding ``encoded`` holds is served from it, any other is encoded at ``level``."""
    merger = Merger(owners)
    added = merger.add(part)
    by_name = {f.name: f for f in part.families}
    gz = []
    for fam in added:
        src = by_name.get(fam.name)
        hit = encoded.get(id(src)) if src is not None else None
        if hit is not None and hit[0] is src and src.lines == fam.lines \
                and src.help == fam.help and src.type == fam.type:
            gz.append(hit[1])
        else:
            gz.append(gzip_member(fam.text().encode(), level))
    return _Segment(key, source, added, b"".join(gz), merger.dropped, merger.owners)


def _slo_segment(key: object, body: bytes, owners: Owners) -> _Segment:
    """The SLO engine's exposition ``body`` as a segment after the names ``owners``
    serves (``key``: their signature); pure, so a worker thread may make it."""
    return _segment(key, body, Part(SLO, parse_families(body.decode())), owners, {},
                    CACHED_LEVEL)


class MetricsAssembler:
    """Assembles the ``/metrics`` body of a running :class:`Scraper` (see module
    docstring); ``slo_metrics`` returns the SLO engine's exposition (bytes, UTF-8);
    ``closed`` counts the HTTP connections closed by a bound, by reason. Not thread-safe:
    call it from the event loop."""

    def __init__(self, scraper: Scraper,
                 slo_metrics: Callable[[], bytes] | None = None,
                 closed: Counter[str] | None = None,
                 normalized: Callable[[Part], Part] | None = None) -> None:
        self.scraper = scraper
        self.slo_metrics = slo_metrics
        #: Rewrites the normalized part (the trace receiver's real Triton buckets).
        self.normalized = normalized
        #: Series dropped so far, by origin (read by the self-metrics collector).
        self.dropped: Counter[str] = Counter()
        self.registry = self_registry(scraper, self.dropped, closed)
        self._norm: _Segment | None = None
        self._slo: _Segment | None = None
        self._passthrough: _Segment | None = None

    def body(self) -> bytes:
        """The ``/metrics`` body (text format 0.0.4, UTF-8)."""
        return self.encode(False)

    async def encode_async(self, gz: bool) -> bytes:
        """:meth:`encode`, with the SLO engine's segment, when it must be made again,
        made in a worker thread first (the event loop keeps serving meanwhile). Call
        it from the event loop, one call at a time (the web handler holds a lock)."""
        slo_body = self.slo_metrics() if self.slo_metrics is not None else None
        seg = self._slo
        if slo_body is not None and (seg is None or seg.source is not slo_body):
            owners = self._owners_before_slo()
            if owners is not None:
                key = owners_signature(owners)
                self._slo = await asyncio.to_thread(_slo_segment, key, slo_body, owners)
        return self.encode(gz)

    def _owners_before_slo(self) -> Owners | None:
        """The names the segments before the SLO engine's serve (None: two normalized
        families clash, the body is merged whole)."""
        norm = self.scraper.normalized_part
        if self.normalized is not None:
            norm = self.normalized(norm)
        seg_n = self._normalized(norm)
        if seg_n is None:
            return None
        self_part = Part(SELF, parse_families(generate_latest(self.registry).decode()))
        return _segment(None, None, self_part, seg_n.owners, {}, REQUEST_LEVEL).owners

    def encode(self, gz: bool) -> bytes:
        """The ``/metrics`` body, plain or (``gz``) as concatenated gzip members that
        decompress to exactly the plain body."""
        norm = self.scraper.normalized_part
        if self.normalized is not None:
            norm = self.normalized(norm)
        self_part = Part(SELF, parse_families(generate_latest(self.registry).decode()))
        slo_body = self.slo_metrics() if self.slo_metrics is not None else None
        passthrough = self.scraper.passthrough_part
        seg_n = self._normalized(norm)
        if seg_n is None:  # two normalized families clash: merge the whole body
            return self._whole(norm, self_part, slo_body, passthrough, gz)
        segments = [seg_n, _segment(None, None, self_part, seg_n.owners, {}, REQUEST_LEVEL)]
        if slo_body is not None:
            segments.append(self._slo_segment(slo_body, segments[-1].owners))
        segments.append(self._passthrough_segment(passthrough, segments[-1].owners))
        for seg in segments:
            self.dropped.update(seg.dropped)
        self.dropped.update(self.scraper.dropped)  # left out when the cycle's parts were built
        return b"".join(seg.gz if gz else seg.plain for seg in segments)

    # -- segments ---------------------------------------------------------------------
    def _normalized(self, part: Part) -> _Segment | None:
        """The normalized families, first in the body: served whole (none can clash with
        an earlier part); None when two of them clash with each other."""
        key = tuple(id(f) for f in part.families)
        seg = self._norm
        if seg is not None and seg.key == key:
            return seg
        names = claims(part.families)
        if names is None:
            return None
        encoded = self.scraper.encoded
        gz = []
        for fam in part.families:
            hit = encoded.get(id(fam))
            if hit is not None and hit[0] is fam:
                gz.append(hit[1])
            else:  # rewritten for this request (trace buckets): encode it now
                gz.append(gzip_member(fam.text().encode(), REQUEST_LEVEL))
        owners: Owners = {}
        for fam in part.families:
            for n in claims((fam,)) or ():
                owners[n] = (NORMALIZED, fam)
        families = list(part.families)
        seg = _Segment(key, families, families, b"".join(gz), Counter(), owners)
        self._norm = seg
        return seg

    def _slo_segment(self, body: bytes, owners: Owners) -> _Segment:
        key = owners_signature(owners)
        seg = self._slo
        if seg is not None and seg.source is body and seg.key == key:
            return seg
        seg = self._slo = _slo_segment(key, body, owners)
        return seg

    def _passthrough_segment(self, part: Part, owners: Owners) -> _Segment:
        key = owners_signature(owners)
        seg = self._passthrough
        if seg is not None and seg.source is part and seg.key == key:
            return seg
        seg = _segment(key, part, part, owners, self.scraper.encoded, CACHED_LEVEL)
        self._passthrough = seg
        return seg

    def _whole(self, norm: Part, self_part: Part, slo_body: bytes | None,
               passthrough: Part, gz: bool) -> bytes:
        parts = [norm, self_part]
        if slo_body is not None:
            parts.append(Part(SLO, parse_families(slo_body.decode())))
        parts.append(passthrough)
        result = assemble(parts)
        self.dropped.update(result.dropped)
        self.dropped.update(self.scraper.dropped)
        text = result.text.encode()
        return gzip_member(text, REQUEST_LEVEL) if gz else text
