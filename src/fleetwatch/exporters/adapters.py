"""LoRA adapters from vLLM's ``vllm:lora_requests_info`` (the schema's
``modelserver_adapter_requests_present``).

vLLM (V1 ``vllm/v1/metrics/loggers.py``, 0.7.3+) exports one gauge family whose labels
are the state, not its value: ``running_lora_adapters`` and ``waiting_lora_adapters``
hold comma-separated adapter names (``"a1,a2"``; ``""`` for none) and ``max_lora`` the
``--max-loras`` setting; the value is the Unix time the engine last reported that
combination. prometheus_client keeps every label combination ever set, so the exposition
holds past states too; only the series with the greatest value is the current one. The
lists name adapters with at least one request in that state, not how many requests;
per-adapter latency is not in vLLM's own spans either (0.32's ``llm_request`` span names
no model): see docs/traces.md.

This reads the current state and says, for every adapter named by any series (every
adapter the engine has scheduled since it started), whether it has running and waiting
requests (1) or not (0). The family's lines are found by searching the body for its name
(one substring search when it is absent), not by splitting the body into lines.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import NamedTuple

from fleetwatch.exporters.normalized import Normalized
from fleetwatch.exporters.parser import (
    ExpositionError,
    format_value,
    parse_value,
    split_key,
    split_sample_line,
)
from fleetwatch.exporters.snapshot import SeriesKey
from fleetwatch.labels.schema import METRICS
from fleetwatch.labels.text import render_labels

#: The upstream family (text format 0.0.4 spelling; the OpenMetrics ``vllm_`` one too).
LORA_INFO_NAMES = ("vllm:lora_requests_info", "vllm_lora_requests_info")
#: The schema family it feeds.
TARGET = "modelserver_adapter_requests_present"
#: At most this many adapters are reported (a label value per adapter): a bound on what a
#: hostile or broken exposition can make the sidecar hold.
MAX_ADAPTERS = 1000


class AdapterPresence(NamedTuple):
    """One adapter's current state: ``running``/``waiting`` are True when it has at least
    one request in that state."""

    adapter: str
    running: bool
    waiting: bool


def _names(value: str) -> list[str]:
    return [n for n in (part.strip() for part in value.split(",")) if n]


def adapter_presence(text: str) -> list[AdapterPresence]:
    """The adapters of a vLLM exposition body and whether each has running and waiting
    requests now (see the module docstring), sorted by adapter name; ``[]`` when the body
    has no ``lora_requests_info`` series (LoRA off, or no adapter request yet).

    Malformed lines of the family and non-finite values are skipped (the normalizer
    reports malformed lines); at most :data:`MAX_ADAPTERS` adapters."""
    if _SUFFIX not in text:
        return []
    seen: dict[str, None] = {}
    latest: tuple[float, _Lists] | None = None
    for line in _family_lines(text):
        split = split_sample_line(line)
        if isinstance(split, str):
            continue
        lists = _lists_of(split[0])
        try:
            value = parse_value(split[1])
        except ExpositionError:
            continue
        if lists is None or not math.isfinite(value):
            continue
        for name in (*lists.running, *lists.waiting):
            if len(seen) < MAX_ADAPTERS:
                seen.setdefault(name)
        if latest is None or value > latest[0]:
            latest = (value, lists)
    if latest is None:
        return []
    running, waiting = set(latest[1].running), set(latest[1].waiting)
    return [AdapterPresence(a, a in running, a in waiting) for a in sorted(seen)]


class _Lists(NamedTuple):
    """The adapter names of one ``lora_requests_info`` series key."""

    running: tuple[str, ...]
    waiting: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def _lists_of(key: str) -> _Lists | None:
    """The running and waiting adapters of a raw series key, or None when it does not
    parse. Remembered (at most 256 keys): the engine writes the same few keys on every
    scrape, only their values change."""
    try:
        labels = dict(split_key(key)[1])
    except ExpositionError:
        return None
    return _Lists(tuple(_names(labels.get("running_lora_adapters", ""))),
                  tuple(_names(labels.get("waiting_lora_adapters", ""))))


_NAME_LEN = len(LORA_INFO_NAMES[0])
_SUFFIX = "lora_requests_info"


def _family_lines(text: str) -> Iterable[str]:
    """The sample lines of the family: found by searching the body for the name's common
    part once, not by splitting the whole body (the family is a few lines of a large
    exposition)."""
    prefix = _NAME_LEN - len(_SUFFIX)
    at = text.find(_SUFFIX)
    while at >= 0:
        start = at - prefix
        end = text.find("\n", at)
        stop = end if end >= 0 else len(text)
        if start >= 0 and (start == 0 or text[start - 1] == "\n") \
                and text[start:at + len(_SUFFIX)] in LORA_INFO_NAMES \
                and text[at + len(_SUFFIX):at + len(_SUFFIX) + 1] in ("{", " "):
            yield text[start:stop]
        at = text.find(_SUFFIX, stop)


#: Families the adapter step reads and writes (:func:`add_adapters`).
_ACTIVE_INDEX = next(i for i, m in enumerate(METRICS) if m.name == "modelserver_requests_active")
_ADAPTER_INDEX = next(i for i, m in enumerate(METRICS) if m.name == TARGET)


def add_adapters(result: Normalized, text: str) -> None:
    """Set ``modelserver_adapter_requests_present`` of ``result`` from ``text``
    (:func:`~.adapters.adapter_presence`), labelled as the engine's base-model series
    (those of ``modelserver_requests_active`` without ``state``); nothing when the
    engine exposes no model series. Each adapter is an observed model too (``models``:
    vLLM serves it under its own name, so the registry owns it by that name and
    ``modelserver_model_info`` carries its owner). The family's objects are replaced,
    never changed (the last state may share them), and ``vllm:lora_requests_info`` is
    no longer counted as unmapped."""
    present = adapter_presence(text)
    result.unmapped.difference_update(LORA_INFO_NAMES)
    base: tuple[tuple[str, str], ...] | None = None
    for prefix in result.families[_ACTIVE_INDEX]:
        pairs = result.key(prefix)[1]
        base = tuple(p for p in pairs if p[0] != "state")
        break
    fam: dict[str, float | str] = {}
    made: dict[str, SeriesKey] = {}
    for adapter in present if base is not None else ():
        for state, on in (("running", adapter.running), ("waiting", adapter.waiting)):
            pairs = (*(base or ()), ("adapter", adapter.adapter), ("state", state))
            prefix = TARGET + render_labels(pairs)
            fam[prefix] = 1.0 if on else 0.0
            made[prefix] = (TARGET, pairs)
    if base is not None and present:
        labels = dict(base)
        result.models = result.models | {
            (a.adapter, "", labels.get("backend", ""), labels.get("runtime", ""))
            for a in present}
    if not fam and not result.families[_ADAPTER_INDEX]:
        return
    if isinstance(result.keys, dict):
        result.keys.update(made)
    else:
        result.keys = {**result.keys, **made}
    result.families[_ADAPTER_INDEX] = fam
    if result.lines is not None:
        result.lines[_ADAPTER_INDEX] = [f"{p} {format_value(float(v))}"
                                        for p, v in fam.items()]
    if result.numbers is not None:
        result.numbers[_ADAPTER_INDEX] = [float(v) for v in fam.values()]
