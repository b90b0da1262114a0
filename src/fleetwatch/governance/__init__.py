"""Governance: what the platform declares and reviews against what the servers run, and
the steps a new serving path goes through before it replaces the old one (pure: the
sidecar, :mod:`fleetwatch.sidecar.config_watch`, and the commands do the I/O).

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
  an isolation or double-schedules, ``warning`` weakens one) and what to change;
* a **governed file** is one of the declared documents the platform reviews: the model
  registry (:mod:`fleetwatch.labels.registry`), the placement (a sidecar configuration's
  ``placement:``, :mod:`fleetwatch.labels.placement`) and the quota file
  (:mod:`fleetwatch.gpu.quota`);
* a **change** is what differs between two revisions of them, field by field, put in one
  **change class** (:data:`fleetwatch.governance.changes.CHANGE_CLASSES`: model added or
  removed, owner, tier, placement, quota, engine swap, quantization, model version,
  other) and named by an id ``CLASS:SUBJECT`` (``quota:search``, ``engine_swap:ranker``);
* an **approval policy** says which change classes need whose approval; an **approval
  record** (ticket, change, approver, date) in the **changes log**, appended in the same
  commit as the change, grants one (:mod:`fleetwatch.governance.approvals`);
* a **rollout step** is where a candidate version stands — ``shadow`` (it receives a
  mirrored copy of the traffic, its responses discarded), ``canary`` (a share of the real
  traffic), ``full`` (all of it, the old version still loaded), ``old removed`` — and the
  **gate** is what must hold to take the next step (:mod:`fleetwatch.governance.steps`,
  emitted for Argo Rollouts and Flagger by :mod:`fleetwatch.governance.analysis`).
"""
