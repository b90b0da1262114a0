"""Where ``fleetwatch compare`` and ``fleetwatch baseline record`` read each side of a
comparison: per-band SLI summaries (:class:`~fleetwatch.rollout.summary.SLOSummary`) of one
model version (:mod:`fleetwatch.rollout.compare` compares them).

* ``--prometheus URL`` — a Prometheus that scrapes the sidecars (as ``slo report``): the
  per-band event counters summed over instances, since the sidecars started or, with
  ``--range 1h``, their increase over that range (:data:`~fleetwatch.rollout.summary.
  QUERIES`); ``--slos FILE`` adds the objectives (the default margin is half the error
  budget; without them, 1 percentage point);
* ``--slos FILE`` with captured ``/metrics`` bodies, replayed offline through the
  normalizer and the SLO engine exactly as ``fleetwatch slo replay`` reads them
  (:func:`fleetwatch.commands.slo_replay.replay`): ``--captures PATH…`` holds both versions
  (one server serving both), or ``--baseline-captures`` and ``--candidate-captures`` one
  sequence each (a PATH is a capture file or a folder of them);
* ``--baseline FILE`` — a baseline recorded earlier (``fleetwatch baseline record``,
  :mod:`fleetwatch.rollout.baseline`) instead of a live baseline version: the engine-swap
  procedure.

A model or version the source does not have raises :class:`CompareInputError` naming the
versions it has (the command: exit 2); a Prometheus that cannot answer, or answers a
count that is negative, not finite or above 2^53 (:data:`EXPECTED`), raises
``PrometheusError`` naming the query and the series (exit 1).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fleetwatch.commands.prometheus import Expected, PrometheusError
from fleetwatch.commands.slo_replay import ReplayInputError, replay
from fleetwatch.labels.registry import Registry
from fleetwatch.promql import string
from fleetwatch.rollout.summary import (
    MAX_VALUE,
    QUERIES,
    RANGE_QUERIES,
    InconsistentCounts,
    SLOSummary,
    from_engine,
    from_samples,
    versions_in_engine,
)
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.report import detail, printable
from fleetwatch.slo.spec import SLOFile

#: Bad input (unknown model or version, unusable captures): exit 2, one error line.
CompareInputError = ReplayInputError


def capture_paths(paths: Sequence[str], option: str) -> list[Path]:
    """The capture files of ``paths`` (a folder: every file in it, sorted by name);
    raises :class:`CompareInputError` for a path that does not exist or an empty list."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise CompareInputError(f"{option} {raw}: no such file or folder")
    if not out:
        raise CompareInputError(f"{option}: no capture files")
    return out


def replayed(slos: SLOFile, registry: Registry | None, paths: Sequence[Path],
             interval: float | None) -> SLOEngine:
    """The SLO engine after replaying ``paths`` (``fleetwatch slo replay``'s reading)."""
    last: SLOEngine | None = None
    for _, _, engine in replay(slos, registry, paths, interval):
        last = engine
    assert last is not None
    return last


def _unknown(model: str, version: str, versions: list[str], where: str) -> CompareInputError:
    if not versions:
        return CompareInputError(f"model {printable(model)}: not in {where} (no SLO tracks "
                                 "it there: check the model name and the SLO selectors)")
    return CompareInputError(f"model {printable(model)}: no version {printable(version)!r} "
                             f"in {where} (versions: {', '.join(map(repr, versions))})")


def engine_summaries(engine: SLOEngine, model: str) -> list[SLOSummary]:
    """Every version's summaries of ``model`` in a replayed engine."""
    return [s for v, b in versions_in_engine(engine, model)
            for s in from_engine(engine, model, v, b)]


#: What each field's answer must hold (:data:`~fleetwatch.rollout.summary.QUERIES`):
#: counts are events, at most 2^53; every value finite and non-negative.
EXPECTED: Mapping[str, Expected] = {
    "total": Expected("an event count", MAX_VALUE),
    "good": Expected("an event count", MAX_VALUE),
    "latency": Expected("a latency in seconds", MAX_VALUE),
    "concurrency": Expected("a concurrency (requests per replica)", MAX_VALUE),
}


def prometheus_summaries(base: str, model: str, rng: str | None, timeout: float,
                         query: Callable[[str, str, float, Expected],
                                         list[dict[str, object]]],
                         ) -> list[SLOSummary]:
    """Every version's summaries of ``model`` from Prometheus (counts since the sidecars
    started, or increases over ``rng``); ``query`` raises ``PrometheusError`` for an
    answer whose values are not what :data:`EXPECTED` says, and so does a band with more
    good events than events."""
    answers, texts = {}, {}
    for fld, q in QUERIES.items():
        text = (RANGE_QUERIES[fld].format(model=string(model), range=rng)
                if rng and fld in RANGE_QUERIES else q.format(model=string(model)))
        texts[fld] = text
        answers[fld] = query(base, text, timeout, EXPECTED[fld])
    try:
        return from_samples(answers)
    except InconsistentCounts as exc:
        raise PrometheusError(
            f"Prometheus at {base} answered {detail(texts['good'])!r} and "
            f"{detail(texts['total'])!r} with {printable(str(exc))}: more good events "
            "than events") from None


def pick(summaries: Sequence[SLOSummary], model: str, version: str, where: str,
         backend: str | None = None, option: str = "--candidate-backend",
         ) -> list[SLOSummary]:
    """The summaries of one version (of one ``backend``: the engine, when given); raises
    :class:`CompareInputError` naming the versions (or backends) there when it has none,
    or when several backends serve the version and ``backend`` (the command's ``option``)
    does not say which."""
    found = [s for s in summaries if s.model == model and s.model_version == version]
    if not found:
        versions = sorted({s.model_version for s in summaries if s.model == model})
        raise _unknown(model, version, versions, where)
    backends = sorted({s.backend for s in found})
    if backend is not None:
        found = [s for s in found if s.backend == backend]
        if not found:
            raise CompareInputError(f"model {printable(model)} version {printable(version)!r}:"
                                    f" no backend {printable(backend)!r} in {where} "
                                    f"(backends: {', '.join(map(repr, backends))})")
    elif len(backends) > 1:
        raise CompareInputError(f"model {printable(model)} version {printable(version)!r} is "
                                f"served by several backends in {where} "
                                f"({', '.join(map(repr, backends))}): give {option}")
    return found


def with_objectives(summaries: list[SLOSummary], slos: SLOFile | None) -> list[SLOSummary]:
    """``summaries`` with each SLO's objective and SLI kind from ``slos`` (Prometheus has
    neither: without them the margin is 1 percentage point)."""
    if slos is not None:
        specs = {s.name: s for s in slos.slos}
        for s in summaries:
            spec = specs.get(s.slo)
            if spec is not None:
                s.objective, s.sli = spec.objective, spec.sli.kind
    return summaries


class Sources:
    """Where ``compare`` and ``baseline record`` read each side (see the module doc);
    every method raises :class:`CompareInputError` (exit 2) or ``PrometheusError``
    (exit 1). The constructor takes one parameter per source option of the commands (and
    checks their combination), so its parameter list is theirs."""

    def __init__(self, model: str, prometheus: str | None = None, rng: str | None = None,
                 timeout: float = 10.0, slos: SLOFile | None = None,
                 registry: Registry | None = None, interval: float | None = None,
                 captures: Sequence[str] = (), baseline_captures: Sequence[str] = (),
                 candidate_captures: Sequence[str] = ()) -> None:
        """The comparison of ``model``'s versions from Prometheus (``prometheus`` URL,
        ``rng`` range) or from replayed captures (with ``slos``, ``registry``, ``interval``
        seconds); raises :class:`CompareInputError` for a contradictory choice.

        Many parameters: one per option of ``fleetwatch compare`` and ``baseline record``,
        which share this class; each has a default and a caller passes what was given."""
        self.model = model
        if rng is not None:  # a Prometheus range, written back exactly (never raw text)
            from fleetwatch.slo.durations import format_duration, parse_duration

            try:
                rng = format_duration(parse_duration(rng))
            except ValueError as exc:
                raise CompareInputError(f"--range: {exc}") from None
        self.prometheus, self.rng, self.timeout = prometheus, rng, timeout
        self.slos, self.registry, self.interval = slos, registry, interval
        self.captures = captures
        self.side_captures = {"baseline": baseline_captures, "candidate": candidate_captures}
        self._engines: dict[tuple[str, ...], SLOEngine] = {}
        #: The option naming each side's backend (``baseline record`` has ``--backend``).
        self.backend_option = {"baseline": "--baseline-backend",
                               "candidate": "--candidate-backend"}
        self._prom: list[SLOSummary] | None = None
        offline = bool(captures or baseline_captures or candidate_captures)
        if prometheus and offline:
            raise CompareInputError("give --prometheus or captures, not both")
        if not prometheus and not offline:
            raise CompareInputError("give --prometheus URL, or --slos FILE with captures")
        if offline and slos is None:
            raise CompareInputError("captures need --slos FILE (the SLOs to replay them with)")
        if captures and (baseline_captures or candidate_captures):
            raise CompareInputError("give --captures (both versions in one sequence) or "
                                    "--baseline-captures/--candidate-captures, not both")

    def describe(self, side: str) -> str:
        """Where ``side`` (baseline or candidate) is read, for messages and baselines."""
        if self.prometheus:
            rng = f" over {self.rng}" if self.rng else " since the sidecars started"
            return f"Prometheus {self.prometheus}{rng}"
        paths = self.captures or self.side_captures[side]
        return f"the replay of {', '.join(paths)}"

    def side(self, side: str, version: str, backend: str | None = None) -> list[SLOSummary]:
        """The summaries of ``version`` (of ``backend``, when given) read as ``side``
        (baseline or candidate)."""
        where = self.describe(side)
        if self.prometheus:
            if self._prom is None:
                from fleetwatch.commands.prometheus import query
                from fleetwatch.commands.slo_report import check_target

                check_target(self.prometheus, self.timeout)
                self._prom = prometheus_summaries(self.prometheus, self.model, self.rng,
                                                  self.timeout, query)
            return with_objectives(pick(self._prom, self.model, version, where, backend,
                                        self.backend_option[side]), self.slos)
        paths = tuple(self.captures or self.side_captures[side])
        if not paths:
            raise CompareInputError(f"no source for the {side}: give --prometheus URL, "
                                    f"--captures or --{side}-captures")
        if paths not in self._engines:
            assert self.slos is not None
            files = capture_paths(paths, "--captures" if self.captures
                                  else f"--{side}-captures")
            self._engines[paths] = replayed(self.slos, self.registry, files, self.interval)
        return pick(engine_summaries(self._engines[paths], self.model), self.model, version,
                    where, backend, self.backend_option[side])
