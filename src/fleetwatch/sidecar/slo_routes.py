"""The SLO engine's HTTP routes and its /metrics families (``/slo``, ``/autoscaling``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import generate_latest

from fleetwatch.rollout.export import RolloutCollector
from fleetwatch.sidecar.slo_worker import EngineWorker
from fleetwatch.sidecar.strictjson import json_response
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.export import slo_registry
from fleetwatch.slo.outputs.status import autoscaling_document, slo_document, strict_json

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def slo_routes(engine: SLOEngine, worker: EngineWorker | None = None,
               ) -> tuple[dict[str, Handler], Callable[[], bytes]]:
    """HTTP routes and the extra /metrics body of the SLO engine. With ``worker`` (the
    engine updated off the event loop) they serve what it rendered after its last
    update, never waiting for one in progress; without, they read the engine.

    * ``/slo`` — per SLO and model: state and its explanation, budget, burn rates by
      window and band, capacity (JSON);
    * ``/autoscaling`` — KEDA metrics-api JSON, one object per model: ``signal``, its
      ``components``, ``capacity``, ``concurrency``, ``state``;
    * ``/autoscaling/{model}`` — one model (all its versions): ``signal`` is the largest
      of its versions' signals; KEDA ``valueLocation: signal``.

    The /metrics body is made once per engine update. Every answer is strict JSON
    (:mod:`fleetwatch.sidecar.strictjson`: ``null``, never ``NaN``).
    """
    registry = slo_registry(engine)
    registry.register(RolloutCollector(engine))  # fleetwatch_rollout_verdict

    def slo_doc() -> object:
        return worker.slo_doc if worker else strict_json(slo_document(engine))

    def autoscaling_doc() -> Any:
        return worker.autoscaling_doc if worker else strict_json(autoscaling_document(engine))

    cached: list[object] = [object(), b""]  # [engine.last_update it was made at, body]

    def body() -> bytes:
        """The engine's exposition: the worker's last rendering, or (no worker) made once
        per engine update, not once per /metrics request."""
        if worker:
            return worker.metrics_body
        if cached[0] != engine.last_update:
            cached[1] = generate_latest(registry)
            cached[0] = engine.last_update
        made = cached[1]
        assert isinstance(made, bytes)
        return made

    async def slo(_request: web.Request) -> web.Response:
        return json_response(slo_doc())

    async def autoscaling(_request: web.Request) -> web.Response:
        return json_response(autoscaling_doc())

    async def autoscaling_model(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        items = [o for o in autoscaling_doc()["models"] if o["model"] == model]
        if not items:
            return json_response({"error": f"no such model: {model}"}, status=404)
        return json_response({"model": model, "signal": max(o["signal"] for o in items),
                                  "versions": items})

    routes: dict[str, Handler] = {"/slo": slo, "/autoscaling": autoscaling,
                                  "/autoscaling/{model}": autoscaling_model}
    return routes, body
