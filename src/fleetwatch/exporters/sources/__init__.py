"""The registry of source kinds: every module of this package that defines ``SOURCE``.

Adding a source is adding a module here with a ``SOURCE = Source(...)``
(:class:`fleetwatch.exporters.source.Source`); modules without one are component tables
(``triton_vllm``, ``triton_trtllm``) combined by another source. The configuration's
``kind`` choices, the CLI's ``--source`` choices, :func:`detect_kind`, the ``backend``
and ``runtime`` label values in ``docs/metrics.md`` and the scraper's probes all come
from :data:`SOURCES`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from fleetwatch.exporters.source import Source
from fleetwatch.exporters.table import SourceTable


def _discover() -> tuple[Source, ...]:
    found: list[Source] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        source = getattr(module, "SOURCE", None)
        if isinstance(source, Source):
            found.append(source)
    kinds = [s.kind for s in found]
    dupes = sorted({k for k in kinds if kinds.count(k) > 1} | ({"auto", "unknown"} & set(kinds)))
    if dupes:
        raise RuntimeError(f"source kinds defined twice or reserved: {', '.join(dupes)}")
    return tuple(sorted(found, key=lambda s: (s.detect_priority, s.kind)))


#: Every source, in detection order (lowest ``detect_priority`` first).
SOURCES: tuple[Source, ...] = _discover()

SOURCES_BY_KIND: Mapping[str, Source] = MappingProxyType({s.kind: s for s in SOURCES})

#: An exposition of a server fleetwatch has no mapping for (TGI, …): every family is
#: counted as unmapped (and passed through when pass-through is on).
UNKNOWN = SourceTable(kind="unknown", backend="unknown", rules=(),
                      description="no mapping: everything is unmapped")

#: Mapping table by kind, ``unknown`` included (what :func:`detect_kind` may return).
TABLES: Mapping[str, SourceTable] = MappingProxyType(
    {**{s.kind: s.table for s in SOURCES}, "unknown": UNKNOWN})

#: What a target's ``kind:`` and ``--source`` accept: ``auto`` (detect) or a source kind.
KINDS: tuple[str, ...] = ("auto", *(s.kind for s in SOURCES))

#: ``runtime`` label values whose models are LLMs: each source's ``llm_runtimes``.
LLM_RUNTIMES: frozenset[str] = frozenset(r for s in SOURCES for r in s.llm_runtimes)

#: The kinds of OpenAI-compatible LLM servers (``Source.openai_server``): models read
#: from ``/v1/models``, no model configuration, the pod's GPUs are the model's.
OPENAI_SERVER_KINDS: frozenset[str] = frozenset(s.kind for s in SOURCES if s.openai_server)

#: The per-upstream tables, for documentation (docs/metrics.md).
COMPONENT_TABLES: tuple[SourceTable, ...] = tuple(t for s in SOURCES for t in s.tables)

_DETECT_LINES = 20000


def detect_kind(text: str) -> str:
    """The source kind of an exposition body, or ``unknown`` when no source claims it.

    Looks at the first 20 000 lines: each line's metric name (a sample's, or the family
    of a HELP/TYPE line) is offered to every source's ``claims``; of the sources that
    claimed a line the one with the lowest ``detect_priority`` wins (Triton re-exports
    vLLM families, so Triton is asked before vLLM).
    """
    best: Source | None = None
    for line in text.split("\n", _DETECT_LINES)[:_DETECT_LINES]:
        name = line
        if line.startswith("# "):
            parts = line.split(None, 3)
            if len(parts) < 3:
                continue
            name = parts[2]
        for source in SOURCES:
            if best is not None and source.detect_priority >= best.detect_priority:
                break
            if source.claims(name, line):
                best = source
                break
        if best is SOURCES[0]:
            break
    return best.kind if best is not None else "unknown"
