"""Rollouts: comparing two versions (or two engines) of one model band by band, and the
baselines that store one side of such a comparison.

Pure (no I/O): :mod:`.summary` holds the per-band SLI summary of one SLO on one version
(from the SLO engine, from Prometheus answers or from a baseline file),
:mod:`.compare` the comparison math and the verdict, :mod:`.baseline` the versioned
baseline file format, :mod:`.export` the sidecar's ``fleetwatch_rollout_verdict``
collector. The commands (``fleetwatch compare``, ``fleetwatch baseline record``) and the
sidecar do the reading and writing.
"""
