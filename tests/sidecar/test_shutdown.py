"""SIGTERM drains: the first terminate marks the sidecar draining and stops it only after
``shutdown.drain_seconds``; a second one, or no drain configured, stops it at once."""

from __future__ import annotations

import asyncio

from fleetwatch.sidecar.shutdown import Drain


def test_terminate_drains_then_stops():
    async def run() -> tuple[bool, bool, bool]:
        drain = Drain(asyncio.Event(), 0.05)
        drain.terminate()
        at_once = drain.stop.is_set()  # call_later never runs before this line
        await asyncio.wait_for(drain.stop.wait(), 60)
        return drain.draining, at_once, drain.stop.is_set()

    assert asyncio.run(run()) == (True, False, True)


def test_a_second_terminate_or_no_drain_stops_at_once():
    async def run(drain_seconds: float, times: int) -> bool:
        drain = Drain(asyncio.Event(), drain_seconds)
        for _ in range(times):
            drain.terminate()
        return drain.stop.is_set()

    assert asyncio.run(run(3600, 2)) is True
    assert asyncio.run(run(0, 1)) is True
    assert asyncio.run(run(3600, 1)) is False
