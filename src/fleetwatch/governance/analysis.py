"""fleetwatch's rollout gate as the analysis of progressive-delivery controllers: an Argo
Rollouts ``AnalysisTemplate`` (``argoproj.io/v1alpha1``) and a Flagger ``MetricTemplate``
(``flagger.app/v1beta1``), both with the Prometheus provider.

Both run one query, :func:`gate_query`, over the sidecars' ``fleetwatch_rollout_verdict``
(:mod:`fleetwatch.rollout.export`: the candidate compared with the baseline band by band
on each replica), maximum over replicas and baselines:

* ``0`` — the candidate is ``same`` or ``better``: the gate passes;
* ``1`` — ``not enough data`` in every band (or no verdict yet: no sidecar compares the
  candidate): wait;
* ``2`` — ``worse`` in at least one band with enough data on some replica: roll back.

Argo Rollouts: ``successCondition: result[0] == 0``, ``failureCondition: result[0] ==
2``; 1 meets neither, which Argo calls *inconclusive*. The metric takes ``count``
measurements ``interval`` apart and then completes, so it can be an inline ``- analysis:``
canary step (a metric with an interval and no count runs until stopped or failed, which
only a background analysis may). Argo assesses it as *Failed* once failed measurements
exceed ``failureLimit`` (0: the first ``worse`` rolls back), *Inconclusive* (the rollout
pauses for a person) once inconclusive ones exceed ``inconclusiveLimit``, and *Successful*
when ``count`` is reached otherwise; ``inconclusiveLimit`` is ``count - 1`` so that a
step whose every measurement was "wait" pauses instead of passing: the gate passes after
``count`` measurements with no ``worse`` and at least one pass.

Flagger has no inconclusive result: the Canary's metric sets ``thresholdRange: {max:
1}`` (a check without data passes, a worse one fails) or ``{max: 0}`` (a check without
data fails too). The model and candidate version are the
templates' arguments (Argo ``args``, Flagger ``templateVariables``). Sources: Argo
Rollouts' "Analysis" and "Prometheus" metric provider documentation, Flagger's "Metrics
analysis" documentation (docs/sources.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleetwatch.promql import string

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_COUNT", "DEFAULT_NAME", "GateSettings", "analysis_template",
           "gate_query", "metric_template", "templates", "yaml_files"]

VERDICT = "fleetwatch_rollout_verdict"
#: The templates' default name and the default in-cluster Prometheus address
#: (prometheus-operator's ``prometheus-operated`` Service).
DEFAULT_NAME = "fleetwatch-rollout-gate"
DEFAULT_ADDRESS = "http://prometheus-operated.monitoring.svc:9090"
#: The query's values.
PASS, WAIT, FAIL = 0, 1, 2
#: Argo measurements before the analysis completes (``GateSettings.count``'s default).
DEFAULT_COUNT = 5


@dataclass(frozen=True, slots=True)
class GateSettings:
    """``name`` of both templates, ``namespace`` (None: the applying one), the Prometheus
    ``address`` the controllers query, Argo's ``interval`` between measurements, their
    ``count`` (≥ 1; the inconclusive limit is ``count - 1``, module doc) and the
    ``failure_limit`` it tolerates. Raises ``ValueError`` for a count below 1."""

    name: str = DEFAULT_NAME
    namespace: str | None = None
    address: str = DEFAULT_ADDRESS
    interval: str = "1m"
    count: int = DEFAULT_COUNT
    failure_limit: int = 0

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"count: {self.count}: at least 1 measurement")

    @property
    def inconclusive_limit(self) -> int:
        """Inconclusive measurements tolerated: all but one (module doc)."""
        return self.count - 1


def gate_query(model: str, candidate: str) -> str:
    """The gate's PromQL (0 pass, 1 wait, 2 fail; module doc) for ``model`` and
    ``candidate`` as written (a controller's template variable, e.g. ``{{args.model}}``,
    is written into the string literal as it is)."""
    m = {"model": model, "candidate": candidate}

    def one(verdict: str) -> str:
        labels = ", ".join(f"{k}={string(v)}" for k, v in {**m, "verdict": verdict}.items())
        return f"{VERDICT}{{{labels}}}"

    return (f"max({FAIL} * {one('worse')} or {WAIT} * {one('not_enough_data')})"
            f" or vector({WAIT})")


def _metadata(s: GateSettings) -> dict[str, str]:
    return {"name": s.name, **({"namespace": s.namespace} if s.namespace else {})}


def analysis_template(s: GateSettings) -> dict[str, object]:
    """The Argo Rollouts ``AnalysisTemplate`` (arguments ``model`` and ``candidate``)."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": _metadata(s),
        "spec": {
            "args": [{"name": "model"}, {"name": "candidate"},
                     {"name": "prometheus-address", "value": s.address}],
            "metrics": [{
                "name": "fleetwatch-candidate-not-worse",
                "interval": s.interval,
                "count": s.count,
                "failureLimit": s.failure_limit,
                "inconclusiveLimit": s.inconclusive_limit,
                "successCondition": f"result[0] == {PASS}",
                "failureCondition": f"result[0] == {FAIL}",
                "provider": {"prometheus": {
                    "address": "{{args.prometheus-address}}",
                    "query": gate_query("{{args.model}}", "{{args.candidate}}"),
                }},
            }],
        },
    }


def metric_template(s: GateSettings) -> dict[str, object]:
    """The Flagger ``MetricTemplate`` (template variables ``model`` and ``candidate``)."""
    return {
        "apiVersion": "flagger.app/v1beta1",
        "kind": "MetricTemplate",
        "metadata": _metadata(s),
        "spec": {
            "provider": {"type": "prometheus", "address": s.address},
            "query": gate_query("{{ variables.model }}", "{{ variables.candidate }}"),
        },
    }


def templates(s: GateSettings) -> Mapping[str, dict[str, object]]:
    """``{file name: object}`` of both templates."""
    return {"argo-analysistemplate.yaml": analysis_template(s),
            "flagger-metrictemplate.yaml": metric_template(s)}


def yaml_files(s: GateSettings) -> dict[str, str]:
    """``{file name: YAML text}`` of both templates (queries on one line each)."""
    import yaml

    return {f: yaml.safe_dump(doc, sort_keys=False, width=10_000)
            for f, doc in templates(s).items()}
