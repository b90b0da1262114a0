"""The SLO engine: concurrency-conditioned SLOs over the sidecar's snapshots.

:class:`fleetwatch.slo.engine.SLOEngine` runs an SLO file over successive snapshots,
stage by stage, one subpackage each (a stage imports only the stages before it):

1. :mod:`.decode` — a snapshot's series into per-model deltas over the interval since the
   previous snapshot;
2. :mod:`.account` — each interval's events per SLO, booked into the concurrency band the
   interval ran at, in sliding windows; burn rates;
3. :mod:`.judge` — each (SLO, model)'s state: ok, regression, overload, no_data,
   misconfigured, and a regression re-judged as interference or gpu_degraded;
4. :mod:`.capacity` — the concurrency a model sustains within its SLO, learnt per band;
5. :mod:`.outputs` — ``/slo``, ``/autoscaling``, the ``fleetwatch_slo_*`` series and the
   report rebuilt from Prometheus.

The modules at this level are the SLO file and the words every stage shares:
:mod:`.spec` (the SLO file), :mod:`.sli` (latency SLI names ↔ metric families),
:mod:`.bands` (band labels and burn-rate arithmetic, also used by the generators),
:mod:`.durations`, :mod:`.trace_sli`, :mod:`.state` (one SLO and model's state) and
:mod:`.arrays` (the numpy array types).

Terms: a *model* is ``(model, model_version, backend)``; an *interval* is what one model
did between two snapshots; an *event* is one unit an SLI counts good or bad (a request,
a first token, a time slice); a *band* is a range of per-replica concurrency (requests
in the system), labelled by its upper bound (``+Inf`` above the highest); a *row* is one
(SLO, model, band or ``all``) series of the sliding windows.
"""
