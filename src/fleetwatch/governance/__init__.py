"""Governance: what the platform declares and reviews against what the servers run.

Terms used across the package:

* **declared configuration** — what the model registry says must be running for a model
  (its ``declared:`` block, :class:`fleetwatch.labels.declared.DeclaredSpec`): engine
  version, quantization, model version, Triton instance groups, dynamic batching;
* **running configuration** — what the server reports about the same model
  (:class:`fleetwatch.governance.running.RunningConfig`): Triton's ``/v2`` metadata, its
  ``/v2/models/<m>/config`` and repository index, vLLM's ``/version``;
* **drift** — one field whose declared and running values differ
  (:mod:`fleetwatch.governance.drift`); a field either side does not state is not compared;
* **finding** — one model-configuration pitfall the lint found
  (:mod:`fleetwatch.governance.lint`): a ``check`` name, a ``severity`` (``error`` breaks
  an isolation or double-schedules, ``warning`` weakens one) and what to change.

Everything here is pure: the sidecar (:mod:`fleetwatch.sidecar.config_watch`) and
``fleetwatch lint`` (:mod:`fleetwatch.commands.lint`) do the I/O.
"""
