"""The SLO engine's state across restarts, the I/O part (:mod:`fleetwatch.slo.recover` is the
pure one): the snapshot file in ``state_dir``, Prometheus' HTTP API, and the choice at start.

At start (:func:`recover`), within ``slo.recover.timeout_seconds`` in all: a snapshot
saved less than ``slo.recover.snapshot_max_age_seconds`` ago, else the sidecar's own
series in Prometheus (``slo.recover.prometheus``, selected by ``slo.recover.match``), else
nothing (cold); with Prometheus, the fleet capacities too. One log line says which:
``SLO state recovered from snapshot /var/lib/fleetwatch/slo-state.json (saved 12 s ago,
4 states)``, ``… from Prometheus http://prometheus:9090 (4 states, 2 fleet
capacities)``, or ``SLO state starts cold: …`` with the reasons (a snapshot that is
corrupt, foreign, of another version or too old; Prometheus unreachable, slow or
answering an error). Nothing here raises: a recovery that fails starts cold.

The snapshot (:data:`SNAPSHOT_FILE` in ``state_dir``) is written by :class:`SnapshotWriter`
every ``slo.snapshot_interval_seconds`` from the engine's thread and at shutdown,
atomically: to a temporary file in the same folder, flushed to disk (``fsync``), then
renamed over the old one (and the folder synced), so a crash leaves the old snapshot or the
new one, never half of one. A write that fails is logged (at most once a minute) and the
sidecar goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from fleetwatch.sidecar.config import SidecarConfig
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.recover import prometheus as prom
from fleetwatch.slo.recover.records import Recovered
from fleetwatch.slo.recover.snapshot import SnapshotError, decode, encode

log = logging.getLogger("fleetwatch.recover")

#: The snapshot's file name in ``state_dir``.
SNAPSHOT_FILE = "slo-state.json"
#: The largest snapshot read (bytes); a larger file is not a snapshot this sidecar wrote.
MAX_SNAPSHOT_BYTES = 256 * 2**20
#: The largest answer read from Prometheus (bytes).
MAX_ANSWER_BYTES = 64 * 2**20
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class RecoverError(RuntimeError):
    """A source that gave no recovery (message: why, one line)."""


def read_snapshot(state_dir: str, now: float, max_age: float) -> Recovered:
    """The snapshot in ``state_dir`` if it is whole and saved less than ``max_age``
    seconds before ``now`` (Unix seconds). Raises :class:`RecoverError` saying why not."""
    path = Path(state_dir) / SNAPSHOT_FILE
    try:
        size = path.stat().st_size
        if size > MAX_SNAPSHOT_BYTES:
            raise RecoverError(f"snapshot {path} ignored: {size} bytes, more than "
                               f"{MAX_SNAPSHOT_BYTES // 2**20} MiB")
        body = path.read_bytes()
    except FileNotFoundError:
        raise RecoverError(f"no snapshot in {state_dir}") from None
    except OSError as exc:
        raise RecoverError(f"snapshot {path} ignored: cannot read it: "
                           f"{exc.strerror or exc}") from None
    try:
        rec = decode(body)
    except SnapshotError as exc:
        raise RecoverError(f"snapshot {path} ignored: {exc}") from None
    age = now - rec.saved
    if not 0 <= age <= max_age:
        raise RecoverError(f"snapshot {path} ignored: saved {age:.0f} s ago "
                           f"(slo.recover.snapshot_max_age_seconds {max_age:g})")
    return rec


def write_snapshot(state_dir: str, rec: Recovered) -> Path:
    """Write ``rec`` as the snapshot in ``state_dir`` atomically (see the module doc);
    returns its path. Raises ``OSError``."""
    folder = Path(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    body = encode(rec)
    fd, tmp = tempfile.mkstemp(prefix=f".{SNAPSHOT_FILE}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        path = folder / SNAPSHOT_FILE
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


class SnapshotWriter:
    """Writes the engine's snapshot to ``state_dir`` at most every ``interval`` seconds
    (:meth:`maybe_save`, from the engine's thread after an update) and on :meth:`save`."""

    def __init__(self, state_dir: str, interval: float) -> None:
        self.state_dir, self.interval = state_dir, interval
        self._last = time.monotonic()
        self._last_error = -math.inf
        self.saved = 0

    def maybe_save(self, engine: SLOEngine) -> None:
        if time.monotonic() - self._last >= self.interval:
            self.save(engine)

    def save(self, engine: SLOEngine) -> Path | None:
        """Write the snapshot now; its path, or None when the write failed (logged at most
        once a minute)."""
        self._last = time.monotonic()
        try:
            path = write_snapshot(self.state_dir, engine.snapshot())
        except OSError as exc:
            if self._last - self._last_error >= 60:
                self._last_error = self._last
                log.error("cannot write the SLO state snapshot to %s: %s", self.state_dir,
                          exc.strerror or exc)
            return None
        self.saved += 1
        return path


def own_match(match: dict[str, str]) -> dict[str, str]:
    """``match`` with each ``${VAR}`` replaced by the environment variable's value.
    Raises :class:`RecoverError` naming an unset variable."""
    out = {}
    for k, v in match.items():
        missing = [m for m in _VAR.findall(v) if m not in os.environ]
        if missing:
            raise RecoverError(f"slo.recover.match.{k}: environment variable "
                               f"{missing[0]} is not set")
        out[k] = _VAR.sub(lambda m: os.environ[m.group(1)], v)
    return out


async def _api(session: aiohttp.ClientSession, base: str, path: str,
               params: dict[str, str]) -> list[dict[str, Any]]:
    """``data.result`` of one Prometheus API call (instant vector or matrix)."""
    url = f"{base.rstrip('/')}/api/v1/{path}"
    try:
        async with session.get(url, params=params) as resp:
            raw = await resp.content.read(MAX_ANSWER_BYTES + 1)
            if len(raw) > MAX_ANSWER_BYTES:
                raise RecoverError(f"Prometheus at {base} answered more than "
                                   f"{MAX_ANSWER_BYTES // 2**20} MiB")
            if resp.status != 200:
                raise RecoverError(f"Prometheus at {base} answered HTTP {resp.status} to "
                                   f"{params.get('query', '')[:80]!r}")
    except aiohttp.ClientError as exc:
        raise RecoverError(f"cannot query Prometheus at {base}: "
                           f"{type(exc).__name__}: {str(exc)[:120]}") from None
    try:
        body = json.loads(raw)
        result = body["data"]["result"]
        if body.get("status") != "success" or not isinstance(result, list):
            raise ValueError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise RecoverError(f"Prometheus at {base} answered something that is not a "
                           "query result") from None
    return [s for s in result if isinstance(s, dict)]


async def _answers(base: str, match: dict[str, str], engine: SLOEngine,
                   now: float) -> prom.Answers:
    """Every query of a recovery at once (see :mod:`fleetwatch.slo.recover.prometheus`)."""
    answers = prom.Answers(now)
    at = {"time": repr(now)}
    async with aiohttp.ClientSession() as session:
        calls: list[tuple[str, float | None, Any]] = []
        for metric in prom.INSTANT:
            calls.append((metric, None, _api(session, base, "query",
                                             {"query": prom.own_last(metric, match), **at})))
        for q in prom.window_queries(engine.window_lengths, engine.ledger.windows.buckets,
                                     now):
            for metric in (prom.EVENTS, prom.GOOD):
                params = {"query": prom.own(metric, match), "start": repr(q.start),
                          "end": repr(q.end), "step": repr(q.step)}
                calls.append((metric, q.length, _api(session, base, "query_range", params)))
        fleet = _api(session, base, "query", {"query": prom.FLEET_CAPACITY, **at})
        got = await asyncio.gather(fleet, *(c for _, _, c in calls))
    answers.fleet = got[0]
    for (metric, length, _c), result in zip(calls, got[1:], strict=True):
        if length is None:
            answers.instant[metric] = result
        else:
            answers.ranges[(metric, length)] = result
    return answers


async def from_prometheus(cfg: SidecarConfig, engine: SLOEngine, now: float) -> Recovered:
    """The recovery Prometheus gives (raises :class:`RecoverError`)."""
    rc = cfg.slo.recover
    assert rc.prometheus is not None
    answers = await _answers(str(rc.prometheus), own_match(rc.match), engine, now)
    return prom.rebuild(answers, engine.window_lengths, engine.ledger.windows.buckets,
                        engine.spec.capacity.window)


async def recover(cfg: SidecarConfig, engine: SLOEngine, now: float) -> Recovered | None:
    """Restore ``engine`` at start (see the module doc); returns the recovery applied
    (None: cold). Never raises; never takes longer than ``slo.recover.timeout_seconds``."""
    rc = cfg.slo.recover
    why: list[str] = []
    rec: Recovered | None = None
    if cfg.state_dir is not None:
        try:
            rec = read_snapshot(cfg.state_dir, now, rc.snapshot_max_age_seconds)
        except RecoverError as exc:
            why.append(str(exc))
    fleet: dict[Any, float] = {}
    if rc.prometheus is not None:
        try:
            got = await asyncio.wait_for(from_prometheus(cfg, engine, now), rc.timeout_seconds)
            fleet = got.fleet
            if not got.states:
                why.append(f"Prometheus at {rc.prometheus} has no SLO series matching "
                           f"slo.recover.match")
            elif rec is None:
                rec = got
        except RecoverError as exc:
            why.append(str(exc))
        except asyncio.TimeoutError:
            why.append(f"Prometheus at {rc.prometheus} did not answer within "
                       f"slo.recover.timeout_seconds ({rc.timeout_seconds:g} s)")
        except Exception as exc:  # a bug must not stop the start: cold, and say it
            log.exception("SLO state recovery from Prometheus failed")
            why.append(f"recovery from Prometheus failed: {type(exc).__name__}")
    if rec is None:
        log.info("SLO state starts cold%s: %s",
                 f" ({len(fleet)} fleet capacities from Prometheus)" if fleet else "",
                 "; ".join(why) or "no slo.recover.prometheus and no state_dir configured")
        if fleet:
            rec = Recovered("prometheus", now, engine.ledger.windows.buckets, fleet=fleet)
            engine.restore(rec)
        return rec if fleet else None
    rec.fleet = fleet
    if rec.source == "snapshot":
        where = f"snapshot {Path(cfg.state_dir or '') / SNAPSHOT_FILE}"
        age = f"saved {now - rec.saved:.0f} s ago, "
    else:
        where, age = f"Prometheus {rc.prometheus}", ""
    log.info("SLO state recovered from %s (%s%d states, %d fleet capacities)%s", where, age,
             len(rec.states), len(fleet), f"; {'; '.join(why)}" if why else "")
    engine.restore(rec)
    return rec
