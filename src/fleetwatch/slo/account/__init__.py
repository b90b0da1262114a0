"""Stage 2, account: each interval's events per SLO, in the band of its concurrency.

Terms:

* *concurrency* (:mod:`.concurrency`): an interval's time-averaged requests in the
  system (Little's law cross-checked with the running + waiting gauges);
* *columns* (:mod:`.columns`): the events of every model of a target for one SLO, as
  arrays read from the decoder's per-slot results, compiled per plan as a *view*;
* *booking*: one (SLO, model)'s good and total events of an interval, into its band's
  row and its ``all`` row, with the band's latency evidence for capacity
  (:mod:`.bookings`); the *book* (:mod:`.book`) makes an update's bookings for every
  (SLO, model) of a target at once;
* *ledger* (:mod:`.ledger`): every row's events over every window length
  (:mod:`.windows`: fixed-memory sliding windows), the *burn rate* per row and window
  (error rate ÷ error budget) and which rows *burn* (faster than a window pair's
  threshold on both windows); also which models an SLO *selects*;
* *gauges* (:mod:`.gauges`): per model what its last interval with data said (its
  concurrency, the concurrent-slot limit, queue wait, KV-cache usage);
* *layout* (:mod:`.layout`): each model's SLO entries and the column views compiled
  for the current states and rows;
* *target accounts* (:mod:`.targets`): one decoded snapshot accounted target by
  target — its *live* models' gauges and bookable (SLO, model) pairs, the update's
  bookings, then when each model was seen;
* *trace events* (:mod:`.trace_book`): already-judged events of ``sli.source: traces``
  SLOs, booked one at a time;
* *tracked states* (:mod:`.tracked`): the (SLO, model) states made within the SLO's
  model limit (:mod:`.limits`), when each model last had data, and which are *gone*
  (no data for ``limits.forget_model_after`` seconds).

Events that are none or not finite are never booked.
"""
