"""Shared GPUs: placement discovery, memory footprints, team quotas, the placement policy
and the rollout memory plan — pure functions of what the servers report (normalized
snapshots, raw exposition lines the schema drops, Triton's model config and statistics
documents) and of the declared specs (sidecar ``placement:``, registry, quota file).
Nothing here does I/O; the sidecar (:mod:`fleetwatch.sidecar.gpu_facts`) and the commands
(``fleetwatch quota``, ``fleetwatch rollout plan``) feed it. See ``docs/gpus.md``."""
