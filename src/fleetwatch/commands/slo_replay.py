"""``fleetwatch slo replay``: feed captured ``/metrics`` bodies through the normalizer and
the SLO engine, offline, and print what the sidecar's ``/slo`` and ``/autoscaling`` would
have said ("what would the engine have said about last night?").

A capture's time (Unix seconds) is the ``<unix_ms>`` in its file name (12–14 digits, e.g.
``0007-1796116891265.prom`` as ``tools/capture_vllm_sweep.py`` writes them), or, with
``--interval S``, S seconds after the previous capture in the order given; a single
capture needs no time (it primes the counters and has no interval to account: the
warning says what it gives). Captures are replayed in time order; each is one snapshot of
one target. Output is strict JSON (``null``, never ``NaN``): one document ``{"slo": …,
"autoscaling": …}``, or with ``--each`` one such line per capture (with its ``capture``
name and ``timestamp``).

Bad input — an unreadable or non-UTF-8 file, a file or gzip body past
:data:`~fleetwatch.exporters.capture.MAX_CAPTURE_BYTES` (refused from its size, unread), a
body that is not a Prometheus exposition of a known source, one the normalizer refuses
whole (``too_many_series``), a name without a timestamp (and no ``--interval``), two
captures at the same time, captures of two servers interleaved
(:class:`~fleetwatch.commands.captures.OneServer`) — is one ``fleetwatch: error: FILE: …``
line and exit 2. An ``--html`` path whose folder does not exist is exit 1 before anything
is replayed or printed.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from fleetwatch.commands.captures import OneServer, read_capture, too_many_series
from fleetwatch.exporters.capture import CaptureError
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.validate import TOO_MANY_SERIES, Limits
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.status import autoscaling_document, slo_document, strict_json
from fleetwatch.slo.spec import SLOFile

if TYPE_CHECKING:
    from fleetwatch.exporters.normalize import Normalized

_STAMP = re.compile(r"(?<!\d)(\d{12,14})(?!\d)")


class ReplayInputError(click.ClickException):
    """Bad replay input: one ``fleetwatch: error:`` line naming the file, exit 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"fleetwatch: error: {self.format_message()}", err=True)


class ReplayOutputError(ReplayInputError):
    """An output the replay cannot write (``--html`` into a missing folder): exit 1."""

    exit_code = 1


def normalizer_for(kind_hint: str | None = None) -> Callable[[str, str], Normalized]:
    """The one adapter to the exporters' normalizer: a function ``(body, file name) →
    Normalized`` that detects the source kind of the first body and keeps one
    normalizer per kind (as a sidecar keeps one per target)."""
    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.parser import describe_if_not_metrics
    from fleetwatch.exporters.sources import TABLES, detect_kind

    cache: dict[str, Normalizer] = {}

    def normalize(text: str, name: str) -> Normalized:
        kind = kind_hint or detect_kind(text)
        if kind not in TABLES or kind == "unknown":
            why = describe_if_not_metrics(text) or "no Triton, vLLM or dcgm-exporter family"
            raise ReplayInputError(f"{name}: not a /metrics body of a known source: {why}")
        norm = cache.get(kind)
        if norm is None:
            norm = cache[kind] = Normalizer(TABLES[kind])
        return norm.normalize(text)

    return normalize


def capture_times(paths: Sequence[Path], interval: float | None) -> list[float]:
    """Unix seconds of each capture: from the ``<unix_ms>`` of its name, or every
    ``interval`` seconds in the order given."""
    if interval is not None:
        if not interval > 0:
            raise ReplayInputError(f"--interval must be positive seconds, not {interval:g}")
        return [i * interval for i in range(len(paths))]
    if len(paths) == 1 and not _STAMP.findall(paths[0].name):
        return [0.0]  # one capture only primes the counters: its time is never read
    out: list[float] = []
    for p in paths:
        if not p.is_file():  # say the file is missing before asking for its time
            _read(p)
            raise ReplayInputError(f"{p}: not a regular file")
        found = _STAMP.findall(p.name)
        if not found:
            raise ReplayInputError(f"{p}: no <unix_ms> time in the file name (e.g. "
                                   "0007-1796116891265.prom); give --interval SECONDS")
        out.append(int(found[-1]) / 1000.0)
    return out


def _read(path: Path) -> str:
    try:
        return read_capture(path)
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except CaptureError as exc:
        raise ReplayInputError(f"{path}: {exc}") from None


def replay(slos: SLOFile, registry: Registry | None, paths: Sequence[Path],
           interval: float | None = None, models: set[str] | None = None,
           ) -> Iterator[tuple[Path, float, SLOEngine]]:
    """Feed the captures in time order; yields ``(path, timestamp, engine)`` after each.
    ``models``, when given, collects the model names the captures expose."""
    times = capture_times(paths, interval)
    order = sorted(range(len(paths)), key=lambda i: times[i])
    for a, b in itertools.pairwise(order):
        if times[a] == times[b]:
            raise ReplayInputError(f"{paths[b]}: same time as {paths[a]} "
                                   f"({times[a]:.3f}); captures must be distinct in time")
    engine = SLOEngine(slos, registry)
    normalize = normalizer_for()
    one_server = OneServer()
    for i in order:
        path = paths[i]
        text = _read(path)
        past = too_many_series(text, Limits().max_series)
        if past is not None:
            raise ReplayInputError(f"{path}: refused ({TOO_MANY_SERIES}): {past}")
        normalized = normalize(text, str(path))
        if normalized.refused is not None:
            reason, message = normalized.refused
            raise ReplayInputError(f"{path}: refused ({reason}): {message}")
        other = one_server.check(str(path), text, normalized)
        del text  # the largest object of a step: not kept while the engine runs
        if other is not None:
            raise ReplayInputError(f"{path}: {other}; replay one server's captures at a time")
        damaged = damage(path, normalized)
        if damaged:
            click.echo(f"fleetwatch: warning: {damaged}", err=True)
        if models is not None:
            models.update(m[0] for m in normalized.models)
        engine.update(Snapshot(times[i], {"replay": normalized}))
        yield path, times[i], engine


def damage(path: Path, normalized: Normalized) -> str:
    """One line saying what of a capture the normalizer could not use (lines it skipped,
    samples it refused: e.g. a capture cut off mid-histogram), or "" for a whole one. The
    replay goes on without them, as the sidecar would on that scrape."""
    skipped, refused = len(normalized.meta.invalid), normalized.invalid_samples.total()
    if not skipped and not refused:
        return ""
    reasons = ", ".join(sorted(normalized.invalid_samples))
    return (f"{path}: {skipped} line(s) skipped, {refused} sample(s) refused"
            f"{f' ({reasons})' if reasons else ''}; replayed without them "
            f"(fleetwatch normalize {path} shows which)")


def check_output(path: Path) -> None:
    """Refuse an output file that cannot be written, before any work (exit 1 naming it):
    a missing folder, a folder in its place."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ReplayOutputError(f"{path}: cannot write: no folder {folder}")
    if path.is_dir():
        raise ReplayOutputError(f"{path}: cannot write: a folder")


def document(engine: SLOEngine) -> dict[str, object]:
    """``{"slo": /slo, "autoscaling": /autoscaling}`` as the sidecar serves them."""
    return {"slo": slo_document(engine), "autoscaling": autoscaling_document(engine)}


def empty_warning(slos: SLOFile, registry: Registry | None, captures: int, models: set[str],
                  engine: SLOEngine) -> str:
    """Why the replay accounted no (SLO, model) pair and what that leaves empty: ``/slo``
    lists no SLO; ``/autoscaling`` may still carry the models' signals (they need no SLO).
    One capture has no interval to account; otherwise no SLO selects a model of the
    captures, and SLOs that select by ``latency_tiers`` or ``teams`` without a registry
    (``--registry``, where those come from) are named."""
    has_signals = bool(autoscaling_document(engine)["models"])
    empty = ("/slo lists no SLO (/autoscaling has the models' signals, without capacity)"
             if has_signals else "/slo lists no SLO and /autoscaling no model")
    if captures == 1:
        return ("one capture has no interval to account (the engine reads the change "
                f"between consecutive captures): {empty} — give at least two captures")
    names = ", ".join(sorted(models)[:10]) or "none"
    found = f"no SLO selects a model of the captures (models in them: {names}): {empty}"
    if registry is None or not registry.entries:
        by_registry = [
            f"SLO {s.name} selects by "
            + " and ".join(k for k, v in (("latency_tiers", s.selector.latency_tiers),
                                          ("teams", s.selector.teams)) if v)
            for s in slos.slos if s.selector.latency_tiers or s.selector.teams]
        if by_registry:
            return (f"{found} — {'; '.join(by_registry)}, which only a model registry "
                    "gives: give --registry FILE")
    return f"{found} — check the SLOs' selectors"


def run(slos: SLOFile, registry: Registry | None, paths: Sequence[Path],
        interval: float | None, each: bool, out: Callable[[str], None],
        html: Path | None = None) -> None:
    """Replay and print (see the module doc); with ``html``, also write the status page of
    the replay there (:mod:`fleetwatch.commands.replay_page`)."""
    from fleetwatch.commands.replay_page import new_history, record, write_replay_page

    if not paths:
        raise ReplayInputError("give at least one CAPTURE file")
    if html is not None:
        check_output(html)
    last: SLOEngine | None = None
    history = new_history(len(paths))
    seen: set[str] = set()
    for path, ts, engine in replay(slos, registry, paths, interval, seen):
        last = engine
        record(history, engine)
        if each:
            line = {"capture": str(path), "timestamp": ts, **document(engine)}
            out(json.dumps(strict_json(line), allow_nan=False, sort_keys=True,
                           ensure_ascii=False))
    if last is not None and not last.states:
        click.echo(f"fleetwatch: warning: {empty_warning(slos, registry, len(paths), seen, last)}",
                   err=True)
    if not each and last is not None:
        out(json.dumps(strict_json(document(last)), allow_nan=False, indent=2,
                       sort_keys=True, ensure_ascii=False))  # "≤" as written, not "\u2264"
    if html is not None and last is not None:
        write_replay_page(html, last, history, registry, sorted(paths))
