"""Rollouts: comparing two versions (or two engines) of one model band by band, the
baselines that store one side of such a comparison, and warming a new version up.

Pure (no I/O): :mod:`.summary` holds the per-band SLI summary of one SLO on one version
(from the SLO engine, from Prometheus answers or from a baseline file),
:mod:`.compare` the comparison math and the verdict, :mod:`.render` its text and JSON,
:mod:`.export` the sidecar's ``fleetwatch_rollout_verdict`` collector.

With I/O: :mod:`.sources` reads each side of a comparison (Prometheus, or captures
replayed through the SLO engine), :mod:`.baseline` reads and writes the versioned baseline
file, :mod:`.warmup` sends a model's registry warm-up set to its server. The commands
(:mod:`fleetwatch.commands.rollout`) map their options and errors.
"""
