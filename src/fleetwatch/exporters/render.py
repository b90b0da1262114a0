"""Rendering normalized state as text-format 0.0.4 families.

:func:`normalized_families` gives the schema families of several targets' normalized
state (one HELP/TYPE each, schema order, a series two targets both produce kept once);
:func:`passthrough_families` the upstream families re-emitted unchanged;
:func:`render` joins both into one body (what ``fleetwatch normalize`` prints and the
goldens hold). Merging with other parts of ``/metrics`` is :mod:`.assemble`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from fleetwatch.exporters.assemble import NORMALIZED, PASSTHROUGH, Family, Part, assemble
from fleetwatch.exporters.normalize import Normalized
from fleetwatch.exporters.parser import format_value
from fleetwatch.exporters.validate import help_is_valid
from fleetwatch.labels.schema import METRICS

_EMPTY: Mapping[str, list[str]] = MappingProxyType({})


def text_of(v: float | str) -> str:
    """A normalized value as exposition text (upstream text kept as is)."""
    return v if isinstance(v, str) else format_value(v)


def normalized_families(normalized: Iterable[Normalized],
                        extra_families: Mapping[str, list[str]] = _EMPTY,
                        collisions: list[str] | None = None) -> list[Family]:
    """The schema families of several targets' normalized state, schema order.

    ``extra_families`` (e.g. the registry's ``modelserver_model_info``) adds pre-rendered
    series lines to a family. When two targets produce the same series (two servers of
    one kind without distinguishing ``labels``), the first target's is kept and the
    series prefix is appended to ``collisions`` — never a duplicate series. HELP carries
    the stability (:meth:`~fleetwatch.labels.schema.MetricDef.exposition_help`).
    """
    items = list(normalized)
    out: list[Family] = []
    for i, mdef in enumerate(METRICS):
        lines: list[str] = []
        seen: set[str] | None = set() if len(items) > 1 else None
        for n in items:
            fam = n.families[i]
            if not fam:
                continue
            made = n.lines[i] if n.lines is not None else None  # the normalizer's lines
            if seen is None:
                lines.extend(made if made is not None else
                             [f"{p} {text_of(v)}" for p, v in fam.items()])
                continue
            for j, (p, v) in enumerate(fam.items()):
                if p in seen:
                    if collisions is not None:
                        collisions.append(p)
                    continue
                seen.add(p)
                lines.append(made[j] if made is not None else f"{p} {text_of(v)}")
        lines.extend(extra_families.get(mdef.name, ()))
        if lines:
            out.append(Family(mdef.name, mdef.type, mdef.exposition_help, lines))
    return out


#: The OpenMetrics family types the text format 0.0.4 lacks (its parser refuses the
#: whole scrape on them: "unknown metric type"), and the type their samples are served
#: with in it. An ``info``, ``stateset`` or ``gaugehistogram`` family is split into one
#: family per sample name (``foo_info``; ``foo``; ``foo_bucket``, ``foo_gsum``,
#: ``foo_gcount``), each a gauge — the series Prometheus stores when it scrapes them as
#: OpenMetrics, their values 0/1 or current levels, never counters; ``unknown`` is the
#: text format's ``untyped``. Sources: OpenMetrics 1.0 "Metric types" (Info, StateSet,
#: GaugeHistogram, Unknown); Prometheus text format 0.0.4 (counter, gauge, histogram,
#: summary, untyped).
OPENMETRICS_ONLY: Mapping[str, str] = MappingProxyType({
    "info": "gauge", "stateset": "gauge", "gaugehistogram": "gauge", "unknown": "untyped"})


def passthrough_families(n: Normalized) -> list[Family]:
    """The upstream families of one target re-emitted unchanged (pass-through on),
    with the HELP the upstream wrote and the TYPE it declared before the family's first
    line (a HELP with an escape the text format does not allow, a TYPE after samples are
    left out: a Prometheus would reject the whole scrape); a family of an OpenMetrics-only
    type is served as :data:`OPENMETRICS_ONLY` says."""
    out = []
    for name, lines in n.passthrough.items():
        helptext = n.meta.helps.get(name)
        if helptext is not None and not help_is_valid(helptext):
            helptext = None
        ftype = n.passthrough_types.get(name)
        as_type = OPENMETRICS_ONLY.get(ftype or "")
        if as_type is None:
            out.append(Family(name, ftype, helptext, list(lines)))
        elif as_type == "untyped":
            out.append(Family(name, as_type, helptext, list(lines)))
        else:
            out.extend(Family(sample, as_type, helptext, own)
                       for sample, own in _by_sample_name(lines).items())
    return out


def _by_sample_name(lines: Iterable[str]) -> dict[str, list[str]]:
    """Sample lines (``name{labels} value``) grouped by sample name, in first-seen order."""
    out: dict[str, list[str]] = {}
    for line in lines:
        end = len(line)
        for stop in ("{", " "):
            at = line.find(stop)
            if 0 <= at < end:
                end = at
        out.setdefault(line[:end], []).append(line)
    return out


def render(normalized: Iterable[Normalized],
           extra_families: Mapping[str, list[str]] = _EMPTY,
           collisions: list[str] | None = None) -> str:
    """Render normalized expositions (several targets) as one text-format 0.0.4 body:
    :func:`normalized_families`, then every target's :func:`passthrough_families`,
    merged by :func:`~fleetwatch.exporters.assemble.assemble` (a family or series served
    already is never served twice). ``collisions`` as in :func:`normalized_families`.
    """
    items = list(normalized)
    parts = [Part(NORMALIZED, normalized_families(items, extra_families, collisions),
                  check_names=False, check_series=False)]
    parts += [Part(PASSTHROUGH, passthrough_families(n)) for n in items if n.passthrough]
    return assemble(parts).text
