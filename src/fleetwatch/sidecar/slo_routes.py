"""The SLO engine's HTTP routes and its /metrics families (``/slo``, ``/autoscaling``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import generate_latest

from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.export import slo_registry
from fleetwatch.slo.status import SLOStatus

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def slo_routes(engine: SLOEngine) -> tuple[dict[str, Handler], Callable[[], bytes]]:
    """HTTP routes and the extra /metrics body of the SLO engine.

    * ``/slo`` — per SLO and model: state and its explanation, budget, burn rates by
      window and band, capacity, ``sli_source`` and trace ``sampling`` (JSON);
    * ``/autoscaling`` — KEDA metrics-api JSON, one object per model: ``signal``, its
      ``components``, ``capacity``, ``concurrency``, ``state``;
    * ``/autoscaling/{model}`` — one model (all its versions): ``signal`` is the largest
      of its versions' signals; KEDA ``valueLocation: signal``.
    """
    registry = slo_registry(engine)

    specs = {s.name: s for s in engine.spec.slos}

    def with_source(st: SLOStatus) -> dict[str, object]:
        """A status with where its events come from: ``sli_source`` (metrics | traces)
        and ``sampling`` (each traced request counts as that many events)."""
        sli = specs[st["slo"]].sli
        return {**st, "sli_source": sli.source, "sampling": sli.sampling}

    async def slo(_request: web.Request) -> web.Response:
        return web.json_response({"updated": engine.last_update,
                                  "slos": [with_source(s) for s in engine.status()]})

    async def autoscaling(_request: web.Request) -> web.Response:
        return web.json_response({"updated": engine.last_update,
                                  "models": engine.autoscaling()})

    async def autoscaling_model(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        items = [o for o in engine.autoscaling() if o["model"] == model]
        if not items:
            return web.json_response({"error": f"no such model: {model}"}, status=404)
        return web.json_response({"model": model, "signal": max(o["signal"] for o in items),
                                  "versions": items})

    routes: dict[str, Handler] = {"/slo": slo, "/autoscaling": autoscaling,
                                  "/autoscaling/{model}": autoscaling_model}
    return routes, lambda: generate_latest(registry)
