"""A source table's plans: what compiling a sample of one rule decides once per table.

For every upstream sample name a rule reads (a family's name plus a suffix:
``_bucket``, ``_sum``, …) :func:`table_plans` gives one :class:`Plan` per rule reading
it: the mapping signature (rules with equal signatures map labels alike, so a label
block's mapping is shared), the value check and unit conversion, the target family and
target samples, and whether a series may meet another on one normalized series (fed by
two rules alike). :class:`~.compile.SeriesCompiler` then compiles each series from its
sample's plans.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass

from fleetwatch.exporters.entry import FAMILY_INDEX
from fleetwatch.exporters.parser import render_labels
from fleetwatch.exporters.table import SUFFIXES, Rule, SourceTable
from fleetwatch.exporters.validate import CUMULATIVE, NO_CHECK, QUANTILE
from fleetwatch.labels.schema import METRICS_BY_NAME, allowed_labels


@dataclass(frozen=True, slots=True)
class Plan:
    """What compiling a sample of one rule decides once per table: its mapping signature
    and the le/quantile kept, the value check and unit conversion, the target family,
    and per target sample (suffix, interned name, extra labels and their names, the
    count of a mean-only histogram, fed by two rules, the extra labels rendered without
    braces)."""

    rule: Rule
    sig: int
    base_sig: int  # the signature of the rule without le/quantile kept
    keep: tuple[str, ...]
    whole: bool
    needs_le: bool
    bucket: bool
    check: int
    div: float
    mul: float
    fam_idx: int
    le_scaled: bool
    vm_label: str | None
    simple: bool  # one target sample, no match, value labels, extra labels or le scaling
    tname: str  # the first target sample's name
    multi: bool  # the first target sample may be fed by another rule alike
    scaled: bool  # the value is unit-converted (a scaled slot, not a direct one)
    samples: tuple[tuple[str, str, tuple[tuple[str, str], ...], frozenset[str], bool, bool,
                         str], ...]


def table_plans(table: SourceTable) -> dict[str, list[Plan]]:
    """Per upstream sample name the plans of the rules reading it, in rule order (every
    rule's target must be in the schema: :class:`~.compile.SeriesCompiler` checks)."""
    multi_fed = _multi_fed(table.rules)
    signatures: dict[tuple[object, ...], int] = {}
    out: dict[str, list[Plan]] = {}
    for rule in table.rules:
        suffixes = (rule.part,) if rule.part else SUFFIXES[rule.source_type]
        for suffix in suffixes:
            whole = not rule.part and rule.source_type in ("histogram", "summary")
            # le/quantile belong to a bucket/quantile sample only: never onto a counter
            keep = ("le",) if whole and suffix == "_bucket" else \
                ("quantile",) if whole and rule.source_type == "summary" \
                and not suffix else ()
            sig = signatures.setdefault(_map_signature(rule, keep), len(signatures))
            base_sig = signatures.setdefault(_map_signature(rule, ()), len(signatures))
            out.setdefault(rule.source + suffix, []).append(
                _plan(table, multi_fed, rule, suffix, (sig, base_sig), keep, whole))
    return out


def _plan(table: SourceTable, multi_fed: set[tuple[str, str]], rule: Rule,
          suffix: str, sigs: tuple[int, int], keep: tuple[str, ...], whole: bool) -> Plan:
    """What compiling a sample of ``rule`` (``suffix``) decides once per ``table``
    (``sigs``: the mapping signatures with and without le/quantile kept)."""
    tdef = METRICS_BY_NAME[rule.target]
    if rule.part or rule.source_type in ("counter", "gauge"):
        samples = rule.as_samples
    else:
        samples = ((suffix, ()),)
    # Unit conversion applies to values in the unit (sums, quantiles, gauges,
    # counters), never to observation counts (_count, _bucket).
    scaled = (rule.source_type in ("counter", "gauge") or suffix == "_sum"
              or (rule.source_type == "summary" and suffix == ""))
    div, mul = (rule.divide, rule.multiply) if scaled else (1.0, 1.0)
    t_samples = tuple(
        (t_suffix, sys.intern(rule.target + t_suffix), tuple(extra),
         frozenset(k for k, _ in extra),
         t_suffix == "_count" and rule.as_samples != (("", ()),),
         (rule.target, t_suffix) in multi_fed,
         render_labels(tuple(extra))[1:-1])
        for t_suffix, extra in samples)
    first = t_samples[0]
    return Plan(
        rule=rule, sig=sigs[0], base_sig=sigs[1], keep=keep, whole=whole,
        needs_le=suffix == "_bucket" and not rule.part,
        bucket=whole and suffix == "_bucket",
        check=max(_check_of(rule, suffix),
                  CUMULATIVE if tdef.type == "counter" else NO_CHECK),
        div=div, mul=mul, fam_idx=FAMILY_INDEX[rule.target],
        le_scaled=rule.le_divide != 1.0,
        vm_label=table.value_maps[rule.value_map].source_label
        if rule.value_map else None,
        simple=len(t_samples) == 1 and not first[2] and not first[4] and not rule.match
        and not rule.value_labels and not (rule.le_divide != 1.0 and first[0] == "_bucket"),
        tname=first[1], multi=first[5],
        scaled=div != 1.0 or mul != 1.0 or rule.negative_is_nan,
        samples=t_samples)


def _map_signature(rule: Rule, keep: tuple[str, ...]) -> tuple[object, ...]:
    """What the labels of a series mapped under ``rule`` depend on besides the series'
    labels (``LabelMapper.plan``): rules with equal signatures map alike."""
    tdef = METRICS_BY_NAME[rule.target]
    return (frozenset(allowed_labels(tdef)), tdef.labels, tdef.per_model, rule.match,
            rule.value_map, rule.drop, rule.const, rule.runtime, keep)


def _check_of(rule: Rule, suffix: str) -> int:
    """The value check of an upstream sample under a rule: cumulative samples (counters,
    ``_bucket``/``_count``/``_sum``) must be finite and ≥ 0, quantiles ≥ 0 (or NaN)."""
    if rule.source_type == "counter" or suffix in ("_bucket", "_count", "_sum") \
            or rule.part:
        return CUMULATIVE
    if rule.source_type == "summary":
        return QUANTILE
    return NO_CHECK


def _written(rule: Rule) -> set[str]:
    """The sample suffixes of its target that a rule writes."""
    if rule.part or rule.source_type in ("counter", "gauge"):
        return {suffix for suffix, _ in rule.as_samples}
    return set(SUFFIXES[rule.source_type])


def _multi_fed(rules: Iterable[Rule]) -> set[tuple[str, str]]:
    """(target, suffix) pairs that two rules may both write with the same labels (their
    constant labels agree): aliases, backend-vs-core histograms, dcgm memory parts.
    Only those series need collision tracking (with lossy mappings)."""
    rules = list(rules)
    out: set[tuple[str, str]] = set()
    for i, a in enumerate(rules):
        for b in rules[i + 1:]:
            if a.target != b.target:
                continue
            ca, cb = dict(a.const), dict(b.const)
            if any(ca[k] != cb[k] for k in ca.keys() & cb.keys()):
                continue
            out |= {(a.target, s) for s in _written(a) & _written(b)}
    return out
