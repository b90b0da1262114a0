"""The demo's load on the demo Triton models (loopback only), through the bounded Triton
clients of :mod:`fleetwatch.clients.triton`.

The input factories of the demo models are in `inputs` (`default_inputs` names each
model's); `step_load` (`steps`) holds a closed loop at a sequence of concurrency levels
(for latency-vs-concurrency tests with the ``slo_sim`` model); `run_demo_load` (`demo`)
keeps gentle traffic on the three demo models (``ranker`` versions 1 and 2, ``faulty`` with
a fraction of failing inputs, ``streamer``) until an event is set.
"""

from fleetwatch.demo.load.demo import run_demo_load
from fleetwatch.demo.load.inputs import (
    default_inputs,
    faulty_inputs,
    faulty_is_negative,
    ranker_inputs,
    slo_sim_inputs,
    streamer_inputs,
)
from fleetwatch.demo.load.steps import MAX_STEPS, StepResult, step_load

__all__ = [
    "MAX_STEPS",
    "StepResult",
    "default_inputs",
    "faulty_inputs",
    "faulty_is_negative",
    "ranker_inputs",
    "run_demo_load",
    "slo_sim_inputs",
    "step_load",
    "streamer_inputs",
]
