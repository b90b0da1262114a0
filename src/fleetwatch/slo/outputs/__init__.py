"""Stage 5, outputs: what the engine answers.

* :mod:`.status`: ``/slo`` — per (SLO, model) its state, budget remaining, burn rates by
  window and band, capacity and explanation — and the ``fleetwatch_slo_*`` samples;
* :mod:`.export`: those samples as a Prometheus collector;
* :mod:`.autoscaling`: ``/autoscaling`` — per model its scaling *signal* (the largest of
  its *components*: concurrency ÷ capacity, queue wait, KV-cache usage …);
* :mod:`.readout`: the engine's methods that answer them;
* :mod:`.report`: the same view rebuilt from a Prometheus that scrapes the sidecars
  (``fleetwatch slo report``).
"""
