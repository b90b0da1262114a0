"""Stage 3, judge: the state of each (SLO, model) from its rows' burn.

Terms:

* *state* (:mod:`.states`): ``ok``, ``regression`` (a band inside the concurrency
  envelope burns), ``overload`` (only bands above it burn), ``no_data``,
  ``misconfigured``; its *explanation* is the sentence ``/slo`` shows;
* *envelope*: the concurrency up to which the SLO must hold (the SLO file's);
* *interference* (:mod:`.interference`): a regression of a model whose GPU neighbours'
  load rose as its burn began, correlated with its bad ratio; *gpu_degraded*: a
  regression on a GPU with a slowing condition (:mod:`.gpu_health`: clock events, XID
  errors from dcgm-exporter);
* *marks* (:mod:`.marks`): the states judged at an update, those whose judged inputs
  changed.
"""
