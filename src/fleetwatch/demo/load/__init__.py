"""A bounded load generator for the demo Triton models (loopback only).

Every call is bounded twice: by a request count and by a duration (`bounds`). `send_requests`
(`unary`) sends unary requests over HTTP (``tritonclient.http``) or gRPC
(``tritonclient.grpc``); `stream_requests` (`stream`) drives a decoupled model over a gRPC
bidirectional stream and also records the time to the first response. Each worker thread owns
its client. Targets must be loopback addresses. `step_load` (`steps`) holds a closed loop at a
sequence of concurrency levels (for latency-vs-concurrency tests with the ``slo_sim`` model).
The input factories of the demo models are in `inputs`, the results in `results`.

`run_demo_load` (`demo`) keeps gentle traffic on the three demo models (``ranker`` versions 1
and 2, ``faulty`` with a fraction of failing inputs, ``streamer``) until an event is set.
"""

from fleetwatch.demo.load.bounds import MAX_CONCURRENCY, MAX_DURATION_S, MAX_REQUESTS, MAX_STEPS
from fleetwatch.demo.load.demo import run_demo_load
from fleetwatch.demo.load.inputs import (
    InputFactory,
    default_inputs,
    faulty_inputs,
    faulty_is_negative,
    ranker_inputs,
    slo_sim_inputs,
    streamer_inputs,
)
from fleetwatch.demo.load.results import LoadResult, StepResult
from fleetwatch.demo.load.steps import step_load
from fleetwatch.demo.load.stream import stream_requests
from fleetwatch.demo.load.unary import Protocol, send_requests

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "MAX_STEPS",
    "InputFactory",
    "LoadResult",
    "Protocol",
    "StepResult",
    "default_inputs",
    "faulty_inputs",
    "faulty_is_negative",
    "ranker_inputs",
    "run_demo_load",
    "send_requests",
    "slo_sim_inputs",
    "step_load",
    "stream_requests",
    "streamer_inputs",
]
