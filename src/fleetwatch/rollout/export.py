"""The sidecar's continuous rollout comparison: ``fleetwatch_rollout_verdict``.

For every model of which the SLO engine tracks two or more versions (of one backend), the
*baseline* is the oldest version — the smallest number (versions that are not whole
numbers sort as text, after the numbers) — and each other version is a *candidate*
compared with it (:func:`fleetwatch.rollout.compare.compare` on the engine's per-band
counts over each SLO's period — its error budget's window, the engine's own sliding
window — :func:`fleetwatch.rollout.summary.from_states`). Each pair is a
one-hot state set ``fleetwatch_rollout_verdict{model, baseline, candidate, verdict} 1``
with ``verdict`` one of ``better``, ``same``, ``worse``, ``not_enough_data`` (the others
0), as ``fleetwatch_slo_state`` is. The work per render is one pass over the engine's
states and one comparison per pair; pairs are bounded by the engine's own model limit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetwatch.labels.schema import METRICS_BY_NAME
from fleetwatch.rollout.compare import DEFAULT, VERDICTS, Comparison, Settings, compare
from fleetwatch.rollout.summary import from_states
from fleetwatch.slo.engine import SLOEngine, SLOModelState

VERDICT = "fleetwatch_rollout_verdict"


def verdict_label(verdict: str) -> str:
    """The ``verdict`` label value of a verdict (``not enough data`` → ``not_enough_data``)."""
    return verdict.replace(" ", "_")


def version_order(version: str) -> tuple[int, int, str]:
    """Sort key of versions: whole numbers ascending, then the rest as text."""
    return (0, int(version), "") if version.isdigit() else (1, 0, version)


def _by_model(engine: SLOEngine) -> dict[tuple[str, str], dict[str, list[SLOModelState]]]:
    """(model, backend) → version → its states, in one pass over the engine's states."""
    out: dict[tuple[str, str], dict[str, list[SLOModelState]]] = defaultdict(
        lambda: defaultdict(list))
    for (_, (model, version, backend)), st in sorted(engine.states.items()):
        out[(model, backend)][version].append(st)
    return out


def live_pairs(engine: SLOEngine) -> list[tuple[str, str, str, str]]:
    """``(model, backend, baseline version, candidate version)`` of every model with two
    or more versions in the engine (see the module doc), sorted."""
    out: list[tuple[str, str, str, str]] = []
    for (model, backend), versions in sorted(_by_model(engine).items()):
        ordered = sorted(versions, key=version_order)
        out.extend((model, backend, ordered[0], v) for v in ordered[1:])
    return out


def live_comparisons(engine: SLOEngine, settings: Settings = DEFAULT) -> list[Comparison]:
    """The comparison of each pair of :func:`live_pairs` (one pass over the states)."""
    out = []
    sums = engine.ledger.windows.sums()

    def over_period(st: SLOModelState, band: str) -> tuple[float, float]:
        return engine.window_sums(st, band, st.slo.period_seconds, sums)

    for (model, _backend), versions in sorted(_by_model(engine).items()):
        if len(versions) < 2:
            continue
        ordered = sorted(versions, key=version_order)
        base = from_states(versions[ordered[0]], over_period)
        for cand in ordered[1:]:
            try:
                out.append(compare(model, ordered[0], cand, base,
                                   from_states(versions[cand], over_period), settings))
            except ValueError:  # the versions share no SLO (selectors by version)
                continue
    return out


class RolloutCollector(Collector):
    """Collects ``fleetwatch_rollout_verdict`` from the engine at render time (call from
    the thread that updates the engine)."""

    def __init__(self, engine: SLOEngine, settings: Settings = DEFAULT) -> None:
        self.engine = engine
        self.settings = settings

    def collect(self) -> Iterator[Metric]:
        mdef = METRICS_BY_NAME[VERDICT]
        fam = GaugeMetricFamily(VERDICT, mdef.help, labels=list(mdef.labels))
        for c in live_comparisons(self.engine, self.settings):
            for v in VERDICTS:
                fam.add_metric([c.model, c.baseline, c.candidate, verdict_label(v)],
                               1.0 if c.verdict == v else 0.0)
        yield fam
