"""Rollouts: comparing two versions (or two engines) of one model band by band, and the
baselines that store one side of such a comparison.

Pure (no network, nothing above the SLO engine): :mod:`.summary` holds the per-band SLI
summary of one SLO on one version (from the SLO engine, from Prometheus answers or from a
baseline file), :mod:`.compare` the comparison math and the verdict, :mod:`.render` its
text and JSON, :mod:`.baseline` the versioned baseline file format (read and written),
:mod:`.export` the sidecar's ``fleetwatch_rollout_verdict`` collector. The command layer
does the rest: :mod:`fleetwatch.commands.compare` reads each side (Prometheus, or captures
replayed through the SLO engine), :mod:`fleetwatch.commands.warmup` sends a model's
warm-up set, :mod:`fleetwatch.commands.rollout` holds the rollout commands.
"""
