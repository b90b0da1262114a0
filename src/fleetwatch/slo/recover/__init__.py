"""Recovery: the SLO engine's learned state carried across a restart.

A sidecar restarts on every rollout, node drain and scale event; what the engine learned —
window buckets, error budget, capacity at SLO and its evidence — would otherwise start
again from ``no_data`` and the envelope. Terms:

* a **record** (:class:`~.records.StateRecord`) is what one (SLO, model) state needs to
  start where it was: per band (and ``all``) its cumulative events, its window buckets by
  absolute bucket index, its latency evidence; its capacity and hysteresis;
* a **recovery** (:class:`~.records.Recovered`) is the records of every state, where they
  came from (``snapshot`` or ``prometheus``), and the **fleet capacity** per (SLO, model):
  the smallest capacity the model's replicas learned, recorded by the generated rule
  ``slo_model:fleetwatch_slo_capacity_concurrency:min``, which a state without a record
  starts from instead of the envelope (``recovered_from: fleet``);
* a record is **applied** when the engine makes the state (:func:`~.records.apply`), once:
  the windows then slide on from the store's buckets as if the sidecar had never stopped.

:mod:`.snapshot` encodes a recovery as a versioned file (written atomically by the
sidecar to ``state_dir``); :mod:`.prometheus` rebuilds one from the series the sidecar
exported. The I/O (files, HTTP) is the sidecar's (:mod:`fleetwatch.sidecar.recover`).
"""
