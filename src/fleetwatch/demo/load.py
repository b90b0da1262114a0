"""A bounded load generator for the demo Triton models (loopback only).

Every call is bounded twice: by a request count and by a duration. `send_requests` sends unary
requests over HTTP (``tritonclient.http``) or gRPC (``tritonclient.grpc``); `stream_requests`
drives a decoupled model over a gRPC bidirectional stream and also records the time to the
first response. Each worker thread owns its client. Targets must be loopback addresses.
`step_load` holds a closed loop at a sequence of concurrency levels (for latency-vs-concurrency
tests with the ``slo_sim`` model).

`run_demo_load` keeps gentle traffic on the three demo models (``ranker`` versions 1 and 2,
``faulty`` with a fraction of failing inputs, ``streamer``) until an event is set.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from fleetwatch.demo.triton import TritonServer

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

Protocol = Literal["http", "grpc"]
#: Builds the input tensors (name → array, batch dimension included) of request number ``i``.
InputFactory = Callable[[int], Mapping[str, np.ndarray]]

#: Hard upper bounds of one call.
MAX_REQUESTS = 100_000
MAX_CONCURRENCY = 64
MAX_DURATION_S = 24 * 3600.0
#: Most concurrency steps in one `step_load` call.
MAX_STEPS = 64
_MAX_ERRORS_KEPT = 20


@dataclass
class LoadResult:
    """What one load run did.

    Attributes:
        model: the model name.
        protocol: ``"http"``, ``"grpc"`` or ``"grpc-stream"``.
        model_version: the version asked for ("" = Triton's default policy).
        sent: requests sent.
        succeeded: requests that completed without error (streams: reached the final flag).
        failed: requests that ended with an error or a client timeout.
        latencies_s: end-to-end latency of each succeeded request, in seconds, in completion
            order (streams: until the final flag).
        first_response_s: streams only: time to the first non-empty response of each request
            that got one, in seconds.
        responses: streams only: non-empty responses received.
        errors: the first error messages (at most 20 kept).
        duration_s: wall-clock duration of the run, in seconds.
    """

    model: str
    protocol: str
    model_version: str = ""
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    latencies_s: list[float] = field(default_factory=list)
    first_response_s: list[float] = field(default_factory=list)
    responses: int = 0
    errors: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    def merge(self, other: LoadResult) -> LoadResult:
        """Add ``other``'s counts, latencies and duration into this result; return self."""
        self.sent += other.sent
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.latencies_s.extend(other.latencies_s)
        self.first_response_s.extend(other.first_response_s)
        self.responses += other.responses
        room = _MAX_ERRORS_KEPT - len(self.errors)
        self.errors.extend(other.errors[: max(room, 0)])
        self.duration_s += other.duration_s
        return self


@dataclass
class StepResult:
    """One concurrency step of `step_load`.

    Attributes:
        concurrency: the number of closed-loop clients held during the step.
        t_start: wall-clock time the step started, in seconds since the Unix epoch.
        t_end: wall-clock time the step ended (its last request completed), same clock.
        requests: requests that succeeded.
        failed: requests that ended with an error or a client timeout.
        latencies_s: client-side latency of each succeeded request, in seconds, in completion
            order.
        errors: the first error messages (at most 20 kept).
    """

    concurrency: int
    t_start: float
    t_end: float
    requests: int = 0
    failed: int = 0
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """``t_end - t_start``, in seconds."""
        return self.t_end - self.t_start

    @property
    def throughput_rps(self) -> float:
        """Succeeded requests per second of the step (0.0 for an empty step)."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of `latencies_s` (linear interpolation); NaN when there are none."""
        if not self.latencies_s:
            return math.nan
        return float(np.quantile(self.latencies_s, q))

    @property
    def mean_s(self) -> float:
        """Mean client latency, in seconds; NaN when no request succeeded."""
        return float(np.mean(self.latencies_s)) if self.latencies_s else math.nan

    @property
    def p50_s(self) -> float:
        """Median client latency, in seconds."""
        return self.quantile(0.5)

    @property
    def p99_s(self) -> float:
        """99th percentile of client latency, in seconds."""
        return self.quantile(0.99)


# -- inputs of the demo models ---------------------------------------------------------------


def ranker_inputs(index: int) -> dict[str, np.ndarray]:
    """``ranker``: one row of 4 FP32 features (shape [1, 4]), deterministic in ``index``."""
    row = np.array([index % 7, index % 5, index % 3, 1.0], dtype=np.float32) / 7.0
    return {"INPUT0": row.reshape(1, 4)}


def faulty_inputs(negative_fraction: float = 0.0, length: int = 4) -> InputFactory:
    """``faulty``: FP32 vectors of ``length`` values; a ``negative_fraction`` of them fail.

    Request ``i`` starts with a negative value (so ``faulty`` raises) exactly when
    ``floor((i + 1) * f) > floor(i * f)``: among requests ``0 .. n-1`` exactly ``floor(n * f)``
    fail, spread evenly. ``f = 0`` never fails, ``f = 1`` always does.

    Raises:
        ValueError: ``negative_fraction`` is outside [0, 1] or ``length`` < 1.
    """
    if not 0.0 <= negative_fraction <= 1.0:
        raise ValueError(f"negative_fraction must be in [0, 1], got {negative_fraction}")
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")

    def make(index: int) -> dict[str, np.ndarray]:
        values = np.arange(1, length + 1, dtype=np.float32)
        if faulty_is_negative(index, negative_fraction):
            values[0] = -1.0
        return {"INPUT0": values}

    return make


def faulty_is_negative(index: int, negative_fraction: float) -> bool:
    """Whether `faulty_inputs` (with this fraction) makes request ``index`` fail."""
    return math.floor((index + 1) * negative_fraction) > math.floor(index * negative_fraction)


def streamer_inputs(responses: int = 8) -> InputFactory:
    """``streamer``: ask for ``responses`` streamed responses (INT32 ``N``, shape [1]).

    The model caps ``N`` at 64.
    """

    def make(index: int) -> dict[str, np.ndarray]:
        return {"N": np.array([responses], dtype=np.int32)}

    return make


def slo_sim_inputs(index: int) -> dict[str, np.ndarray]:
    """``slo_sim``: 4 FP32 values ``X`` and the send time ``T0`` (INT64 ns since the epoch).

    ``T0`` is ``time.time_ns()`` when the factory is called, i.e. just before the request is
    sent; the model observes ``now - T0`` as the request's end-to-end latency, queueing included.
    """
    values = np.array([index % 7, 1.0, 2.0, 3.0], dtype=np.float32)
    return {"X": values, "T0": np.array([time.time_ns()], dtype=np.int64)}


def default_inputs(model: str) -> InputFactory:
    """The default input factory of a demo model (``faulty``: never negative).

    Raises:
        ValueError: ``model`` is not a demo model.
    """
    factories: dict[str, InputFactory] = {
        "ranker": ranker_inputs,
        "faulty": faulty_inputs(0.0),
        "streamer": streamer_inputs(8),
        "slo_sim": slo_sim_inputs,
    }
    try:
        return factories[model]
    except KeyError:
        raise ValueError(f"no default inputs for model {model!r}; pass inputs=") from None


# -- bounded scheduling ----------------------------------------------------------------------


def _loopback_address(address: str) -> str:
    """Return ``host:port`` from ``address`` (``[http://]host:port``) if the host is loopback.

    Raises:
        ValueError: no port, or the host is not a loopback address.
    """
    target = address.split("://", 1)[1] if "://" in address else address
    target = target.rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    bare = host.strip("[]")
    try:
        loopback = bare == "localhost" or ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"load is only sent to loopback addresses, not {host!r}")
    return target


def _check_bounds(requests: int, concurrency: int, max_duration_s: float, timeout_s: float) -> None:
    if not 0 <= requests <= MAX_REQUESTS:
        raise ValueError(f"requests must be in [0, {MAX_REQUESTS}], got {requests}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be in [1, {MAX_CONCURRENCY}], got {concurrency}")
    if not 0 < max_duration_s <= MAX_DURATION_S:
        raise ValueError(f"max_duration_s must be in (0, {MAX_DURATION_S:g}], got {max_duration_s}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")


class _Run:
    """Shared state of one load run: hands out request indices and collects outcomes."""

    def __init__(
        self,
        result: LoadResult,
        requests: int,
        max_duration_s: float,
        stop_event: threading.Event | None,
    ) -> None:
        self.result = result
        self.requests = requests
        self.deadline = time.monotonic() + max_duration_s
        self.stop_event = stop_event
        self._next = 0
        self._lock = threading.Lock()

    def claim(self) -> int | None:
        """The next request index, or None when the count, the deadline or the event says stop."""
        with self._lock:
            if self._next >= self.requests or time.monotonic() >= self.deadline:
                return None
            if self.stop_event is not None and self.stop_event.is_set():
                return None
            index = self._next
            self._next += 1
            self.result.sent += 1
            return index

    def success(self, latency_s: float, first_s: float | None = None, responses: int = 0) -> None:
        with self._lock:
            self.result.succeeded += 1
            self.result.latencies_s.append(latency_s)
            if first_s is not None:
                self.result.first_response_s.append(first_s)
            self.result.responses += responses

    def failure(self, message: str, first_s: float | None = None, responses: int = 0) -> None:
        with self._lock:
            self.result.failed += 1
            if first_s is not None:
                self.result.first_response_s.append(first_s)
            self.result.responses += responses
            if len(self.result.errors) < _MAX_ERRORS_KEPT:
                self.result.errors.append(message)


def _run_workers(run: _Run, concurrency: int, worker: Callable[[_Run], None]) -> LoadResult:
    started = time.monotonic()
    crashes: list[BaseException] = []

    def guarded() -> None:
        try:
            worker(run)
        except BaseException as error:  # re-raised below, in the caller's thread
            crashes.append(error)

    threads = [
        threading.Thread(target=guarded, name=f"fleetwatch-load-{i}", daemon=True)
        for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.result.duration_s = time.monotonic() - started
    if crashes:
        raise crashes[0]
    return run.result


def _infer_inputs(module: Any, tensors: Mapping[str, np.ndarray]) -> list[Any]:
    from tritonclient.utils import np_to_triton_dtype

    inputs = []
    for name, array in tensors.items():
        infer_input = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        infer_input.set_data_from_numpy(array)
        inputs.append(infer_input)
    return inputs


# -- public entry points ---------------------------------------------------------------------


def send_requests(
    address: str,
    model: str,
    *,
    protocol: Protocol = "http",
    inputs: InputFactory | None = None,
    requests: int = 100,
    concurrency: int = 1,
    max_duration_s: float = 30.0,
    model_version: str = "",
    timeout_s: float = 10.0,
    stop_event: threading.Event | None = None,
) -> LoadResult:
    """Send up to ``requests`` unary inference requests with ``concurrency`` parallel clients.

    Stops early when ``max_duration_s`` seconds have passed or ``stop_event`` is set; a request
    in flight then still gets up to ``timeout_s`` seconds. So the call returns within about
    ``max_duration_s + timeout_s`` seconds.

    Args:
        address: ``host:port`` of Triton's HTTP or gRPC endpoint (an ``http://`` prefix is
            accepted); the host must be loopback.
        model: the model name.
        protocol: ``"http"`` (tritonclient.http) or ``"grpc"`` (tritonclient.grpc).
        inputs: builds request ``i``'s tensors; default `default_inputs` of ``model``.
        requests: how many requests at most (0 … `MAX_REQUESTS`).
        concurrency: parallel clients, each with one request in flight (1 … `MAX_CONCURRENCY`).
        max_duration_s: stop sending after this many seconds.
        model_version: the version to ask for ("" = Triton's version policy, i.e. the latest).
        timeout_s: per-request client timeout, in seconds.
        stop_event: stop sending when set.

    Returns:
        The `LoadResult`; requests that errored (including server-side exceptions and client
        timeouts) count as ``failed``.

    Raises:
        ValueError: a non-loopback address, an unknown protocol or a bound out of range.
    """
    target = _loopback_address(address)
    _check_bounds(requests, concurrency, max_duration_s, timeout_s)
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc', got {protocol!r}")
    make_inputs = inputs if inputs is not None else default_inputs(model)
    run = _Run(LoadResult(model, protocol, model_version), requests, max_duration_s, stop_event)

    def worker(run: _Run) -> None:
        if protocol == "http":
            import tritonclient.http as module

            client: Any = module.InferenceServerClient(
                target, connection_timeout=timeout_s, network_timeout=timeout_s
            )
            timeout_kwargs: dict[str, Any] = {}
        else:
            import tritonclient.grpc as module

            client = module.InferenceServerClient(target)
            timeout_kwargs = {"client_timeout": timeout_s}
        try:
            while (index := run.claim()) is not None:
                infer_inputs = _infer_inputs(module, make_inputs(index))
                started = time.perf_counter()
                try:
                    client.infer(model, infer_inputs, model_version=model_version, **timeout_kwargs)
                except Exception as error:  # server errors, timeouts, connection errors
                    run.failure(f"{type(error).__name__}: {error}")
                else:
                    run.success(time.perf_counter() - started)
        finally:
            client.close()

    return _run_workers(run, concurrency, worker)


def stream_requests(
    address: str,
    model: str,
    *,
    inputs: InputFactory | None = None,
    requests: int = 20,
    concurrency: int = 1,
    max_duration_s: float = 30.0,
    model_version: str = "",
    timeout_s: float = 10.0,
    stop_event: threading.Event | None = None,
) -> LoadResult:
    """Send up to ``requests`` requests to a decoupled model over gRPC streams.

    Each of the ``concurrency`` workers opens one stream (``start_stream``) and sends one
    request at a time with ``async_stream_infer(..., enable_empty_final_response=True)``,
    reading responses until the final flag. A request succeeds when its final flag arrives
    without error within ``timeout_s`` seconds. Bounded like `send_requests`.

    Args:
        address: ``host:port`` of Triton's gRPC endpoint (loopback only).
        model: the decoupled model's name.
        inputs: builds request ``i``'s tensors; default `default_inputs` of ``model``.
        requests, concurrency, max_duration_s, model_version, timeout_s, stop_event: as in
            `send_requests`.

    Returns:
        The `LoadResult` with ``protocol="grpc-stream"``, ``responses`` and
        ``first_response_s`` filled in.

    Raises:
        ValueError: a non-loopback address or a bound out of range.
    """
    target = _loopback_address(address)
    _check_bounds(requests, concurrency, max_duration_s, timeout_s)
    make_inputs = inputs if inputs is not None else default_inputs(model)
    run = _Run(
        LoadResult(model, "grpc-stream", model_version), requests, max_duration_s, stop_event
    )

    def worker(run: _Run) -> None:
        import tritonclient.grpc as module

        client = module.InferenceServerClient(target)
        responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
        client.start_stream(callback=functools.partial(_enqueue, responses))
        try:
            while (index := run.claim()) is not None:
                request_id = f"fleetwatch-{index}"
                infer_inputs = _infer_inputs(module, make_inputs(index))
                started = time.perf_counter()
                try:
                    client.async_stream_infer(
                        model,
                        infer_inputs,
                        model_version=model_version,
                        request_id=request_id,
                        enable_empty_final_response=True,
                    )
                except Exception as send_error:  # the stream is closed or broken
                    error: str | None = f"{type(send_error).__name__}: {send_error}"
                    first_s, count = None, 0
                else:
                    error, first_s, count = _read_stream(responses, request_id, started, timeout_s)
                if error is None:
                    run.success(time.perf_counter() - started, first_s, count)
                    continue
                run.failure(error, first_s, count)
                # A broken or stuck stream: cancel what is in flight and open a new one. If the
                # server is gone this raises, which ends the worker (and the run) with the error.
                client.stop_stream(cancel_requests=True)
                responses = queue.Queue()
                client.start_stream(callback=functools.partial(_enqueue, responses))
        finally:
            client.stop_stream(cancel_requests=True)
            client.close()

    return _run_workers(run, concurrency, worker)


def _enqueue(sink: queue.Queue[tuple[Any, Any]], result: Any, error: Any) -> None:
    sink.put((result, error))


def _read_stream(
    responses: queue.Queue[tuple[Any, Any]], request_id: str, started: float, timeout_s: float
) -> tuple[str | None, float | None, int]:
    """Read one request's responses until its final flag: (error or None, first_s, count)."""
    first_s: float | None = None
    count = 0
    while True:
        remaining = started + timeout_s - time.perf_counter()
        if remaining <= 0:
            return f"timeout: no final response within {timeout_s:g} s", first_s, count
        try:
            result, error = responses.get(timeout=remaining)
        except queue.Empty:
            continue
        if error is not None:
            return f"{type(error).__name__}: {error}", first_s, count
        response = result.get_response()
        if response.id != request_id:
            continue  # a late response of an earlier, timed-out request
        if response.outputs:
            count += 1
            if first_s is None:
                first_s = time.perf_counter() - started
        final = response.parameters.get("triton_final_response")
        if final is not None and final.bool_param:
            return None, first_s, count


def step_load(
    address: str,
    model: str,
    *,
    steps: Sequence[int] = (1, 2, 4, 8, 16),
    seconds_per_step: float = 5.0,
    model_version: str = "",
    protocol: Protocol = "http",
    inputs: InputFactory | None = None,
    timeout_s: float = 10.0,
    stop_event: threading.Event | None = None,
    on_step: Callable[[int, float, float], None] | None = None,
) -> list[StepResult]:
    """Hold a closed loop at each concurrency level of ``steps`` for ``seconds_per_step``.

    Step ``c`` runs `send_requests` with ``c`` clients, each sending its next request as soon as
    the previous one completes, for ``seconds_per_step`` seconds (or until `MAX_REQUESTS`
    requests); the steps run one after the other. After each step,
    ``on_step(c, t_start, t_end)`` is called (wall-clock seconds since the epoch, as in
    `StepResult`) before the next step starts, so it can scrape metrics without disturbing the
    load. When ``stop_event`` is set the current step ends early (it is still reported) and no
    further step starts. The call returns within about
    ``len(steps) * (seconds_per_step + timeout_s)`` seconds plus the time spent in ``on_step``.

    Args:
        address: ``host:port`` of Triton's HTTP or gRPC endpoint (loopback only).
        model: the model name.
        steps: the concurrency levels, in order (1 … `MAX_STEPS` of them, each 1 …
            `MAX_CONCURRENCY`).
        seconds_per_step: how long each level is held, in seconds.
        model_version: the version to ask for ("" = Triton's version policy).
        protocol: ``"http"`` or ``"grpc"``.
        inputs: builds request ``i``'s tensors; default `default_inputs` of ``model``
            (`slo_sim_inputs` for ``slo_sim``, which stamps the send time).
        timeout_s: per-request client timeout, in seconds.
        stop_event: stop when set.
        on_step: called as ``on_step(concurrency, t_start, t_end)`` after each step.

    Returns:
        One `StepResult` per step that ran, in order.

    Raises:
        ValueError: a non-loopback address, an unknown protocol, no steps, too many steps, a
            non-integer step, a concurrency or duration out of range (the total, ``len(steps) *
            seconds_per_step``, must not exceed `MAX_DURATION_S` either).
    """
    _loopback_address(address)
    steps = list(steps)
    if any(isinstance(c, bool) or not isinstance(c, int) for c in steps):
        raise ValueError(f"steps must be integers, got {steps!r}")
    if not 1 <= len(steps) <= MAX_STEPS:
        raise ValueError(f"steps must have 1 … {MAX_STEPS} levels, got {len(steps)}")
    if not 0 < seconds_per_step <= MAX_DURATION_S:
        raise ValueError(
            f"seconds_per_step must be in (0, {MAX_DURATION_S:g}], got {seconds_per_step}"
        )
    for concurrency in steps:
        _check_bounds(MAX_REQUESTS, concurrency, seconds_per_step, timeout_s)
    if len(steps) * seconds_per_step > MAX_DURATION_S:
        raise ValueError(
            f"len(steps) * seconds_per_step must be <= {MAX_DURATION_S:g} s, "
            f"got {len(steps) * seconds_per_step:g}"
        )
    make_inputs = inputs if inputs is not None else default_inputs(model)
    results: list[StepResult] = []
    for concurrency in steps:
        if stop_event is not None and stop_event.is_set():
            break
        t_start = time.time()
        load = send_requests(
            address,
            model,
            protocol=protocol,
            inputs=make_inputs,
            requests=MAX_REQUESTS,
            concurrency=concurrency,
            max_duration_s=seconds_per_step,
            model_version=model_version,
            timeout_s=timeout_s,
            stop_event=stop_event,
        )
        t_end = time.time()
        results.append(
            StepResult(
                concurrency=concurrency,
                t_start=t_start,
                t_end=t_end,
                requests=load.succeeded,
                failed=load.failed,
                latencies_s=load.latencies_s,
                errors=load.errors,
            )
        )
        if on_step is not None:
            on_step(concurrency, t_start, t_end)
    return results


def run_demo_load(
    server: TritonServer,
    stop_event: threading.Event,
    *,
    max_duration_s: float = 3600.0,
    faulty_fraction: float = 0.1,
    concurrency: int = 2,
    pause_s: float = 0.5,
) -> dict[str, LoadResult]:
    """Keep gentle traffic on the demo models until ``stop_event`` is set or time runs out.

    Each round sends, then pauses ``pause_s`` seconds: 8 ``ranker`` v1 requests over HTTP,
    4 ``ranker`` v2 requests over gRPC, 10 ``faulty`` requests over HTTP of which
    ``faulty_fraction`` fail (spread as in `faulty_inputs`, across rounds), and 2 ``streamer``
    streams of 4–16 responses over gRPC. Returns after at most about ``max_duration_s``
    seconds plus one request timeout, or when the server stops running.

    Returns:
        The accumulated results, keyed ``"ranker/1 http"``, ``"ranker/2 grpc"``,
        ``"faulty http"``, ``"streamer grpc-stream"``.

    Raises:
        ValueError: a bound out of range (see `send_requests`).
    """
    _check_bounds(0, concurrency, max_duration_s, 10.0)
    deadline = time.monotonic() + max_duration_s
    faulty = faulty_inputs(faulty_fraction)
    totals: dict[str, LoadResult] = {}
    round_number = 0

    def add(key: str, result: LoadResult) -> None:
        if key in totals:
            totals[key].merge(result)
        else:
            totals[key] = result

    while not stop_event.is_set() and server.running:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        common: dict[str, Any] = {
            "concurrency": concurrency,
            "max_duration_s": min(remaining, 30.0),
            "timeout_s": 10.0,
            "stop_event": stop_event,
        }
        offset = round_number * 10
        add(
            "ranker/1 http",
            send_requests(server.http_address, "ranker", requests=8, model_version="1", **common),
        )
        add(
            "ranker/2 grpc",
            send_requests(
                server.grpc_address,
                "ranker",
                protocol="grpc",
                requests=4,
                model_version="2",
                **common,
            ),
        )
        add(
            "faulty http",
            send_requests(
                server.http_address,
                "faulty",
                inputs=lambda i, offset=offset: faulty(offset + i),
                requests=10,
                **common,
            ),
        )
        add(
            "streamer grpc-stream",
            stream_requests(
                server.grpc_address,
                "streamer",
                inputs=streamer_inputs(4 + 4 * (round_number % 4)),
                requests=2,
                **common,
            ),
        )
        round_number += 1
        stop_event.wait(pause_s)
    return totals
