"""Stage 4, capacity: the concurrency a model sustains within its SLO (capacity at SLO).

Terms:

* *evidence* (:mod:`.evidence`): per band row its mean concurrency and latency
  distribution over the capacity window (decayed);
* *trusted* band: one with at least ``capacity.min_events`` events over the capacity
  window; a *burning* band: its burn rate over that window is ≥ 1;
* *capacity model* (:mod:`.model`): a fit of the bands' latency quantile against
  concurrency (isotonic, queueing form once the batch slots are full) predicting where
  the latency crosses the SLO threshold;
* *rules* (:mod:`.rules`): how the bands and the model set the capacity, with
  *hysteresis* (an estimate is adopted once it held for ``hysteresis_updates``);
* the *learner* (:mod:`.learner`): the evidence and band rows the rules read, kept
  across updates, and one update of every state's capacity.
"""
