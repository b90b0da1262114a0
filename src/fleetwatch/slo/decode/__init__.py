"""Stage 1, decode: a snapshot's series into per-model deltas (counts, seconds, gauges).

Terms:

* *plan* (:class:`.plan.Plan`): how one target's set of series feeds the deltas,
  compiled once per set of series (label sets repeat every scrape) as index arrays;
* *reader* (:class:`.plan.Reader`): what one series feeds — a bucket, a count, a sum, a
  gauge … of one model;
* *slot*: one scalar field of one model (one distinct reader); the series of a slot are
  summed into it;
* *per-slot results*: an update's value of every slot (reset-aware deltas of the
  cumulative series, gauges at the end of the interval), what the accounting reads
  (:class:`.decoder.Decoded`);
* *merged plan*: one plan over every target of a snapshot, used when a value is refused
  (NaN/±Inf, a negative count: it feeds nothing) or a model is served by two targets
  (its slots summed over them);
* *carry*: a series' last cumulative value is kept while its target is down, so the
  events of the gap count when it returns.
"""
