"""The records the normalized schema is made of: a label (:class:`LabelDef`) and a metric
family (:class:`MetricDef`), with the metric types and stability levels they use.

The tables themselves are :mod:`fleetwatch.labels.schema` (the ``modelserver_*``
families), :mod:`fleetwatch.labels.schema_labels` (every label) and
:mod:`fleetwatch.labels.self_metrics` (the ``fleetwatch_*`` families).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["counter", "gauge", "histogram", "summary"]
Stability = Literal["stable", "beta", "alpha"]


@dataclass(frozen=True)
class LabelDef:
    """One normalized label: its name, meaning and the values it may take."""

    name: str
    help: str
    values: tuple[str, ...] = ()
    otel: str = ""


@dataclass(frozen=True)
class MetricDef:
    """One normalized metric family.

    ``name`` is the Prometheus family name (counters include ``_total``); ``unit`` is
    the base unit ("seconds", "bytes", "ratio", "requests", "tokens", …); ``labels``
    lists the series labels beyond those every per-model metric carries (``model``,
    ``model_version``, ``backend``, ``runtime``, ``dp_rank``); ``per_model`` is False for
    host and GPU series, which carry ``backend`` but no model labels. ``stability`` and
    ``deprecated_since`` (the fleetwatch version that deprecated the family, ``""`` when
    it is not deprecated) are written at the start of the exposed HELP text, as
    Kubernetes and kube-state-metrics do (:attr:`exposition_help`).
    """

    name: str
    type: MetricType
    unit: str
    help: str
    labels: tuple[str, ...] = ()
    stability: Stability = "beta"
    per_model: bool = True
    otel: str = ""
    deprecated_since: str = ""

    @property
    def exposition_help(self) -> str:
        """The HELP text as exposed: ``[STABLE] help``, ``[ALPHA] (Deprecated since 0.2.0)
        help`` (Kubernetes' component-base metrics format)."""
        dep = f"(Deprecated since {self.deprecated_since}) " if self.deprecated_since else ""
        return f"[{self.stability.upper()}] {dep}{self.help}"
