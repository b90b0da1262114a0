"""A source kind as one object: what a server exports and how the sidecar talks to it.

A :class:`Source` bundles the ``kind`` a target declares, its mapping table, how to
recognise its exposition (:attr:`Source.claims`), what to probe for readiness
(:class:`ModelReadyProbe` or :class:`HealthProbe`), for each model's runtime
(:class:`RuntimeProbe`) and for the engine's identity (:class:`IdentityProbe`), its default
metrics port and the documentation of what it leaves unmapped. Probes are declarations
only: the sidecar (:mod:`fleetwatch.sidecar.probes`) does the HTTP; nothing here does I/O.

Every module of :mod:`fleetwatch.exporters.sources` that defines ``SOURCE`` is registered
(:data:`fleetwatch.exporters.sources.SOURCES`); the configuration schema, the CLI, detection,
the documentation and the scraper all read that registry.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from fleetwatch.exporters.table import SourceTable

#: ``interpret(json_document) -> (runtime, problem)``: the runtime label a model's
#: configuration names, or ``(None, why it cannot be read)``.
RuntimeInterpreter = Callable[[object], tuple[str | None, str | None]]


@dataclass(frozen=True)
class ModelReadyProbe:
    """Per-model readiness: ``GET <api_url><path>`` (``{model}`` is the URL-quoted model
    name) answers 200 when the model is ready. Needs the target's ``api_url``; the models
    are the target's ``models`` or those observed."""

    path: str


@dataclass(frozen=True)
class HealthProbe:
    """Engine-wide readiness: ``GET`` the target's ``health_url``, else ``path`` on the
    host of its metrics URL; 200 means every model of the target is ready."""

    path: str = "/health"


@dataclass(frozen=True)
class RuntimeProbe:
    """Runtime discovery: ``GET <api_url><path>`` (``{model}`` URL-quoted) returns a JSON
    document that ``interpret`` turns into the model's ``runtime`` label. Needs the
    target's ``api_url``; a model that does not answer is asked again next scrape."""

    path: str
    interpret: RuntimeInterpreter


#: ``interpret(json_document) -> identity``: the configuration identity a server reports
#: about itself, as ``{"engine_version": …, "quantization": …}`` (keys it does not report
#: are absent); ``{}`` when the document says nothing usable.
IdentityInterpreter = Callable[[object], dict[str, str]]


@dataclass(frozen=True)
class IdentityProbe:
    """Engine identity: ``GET <base><path>`` returns a JSON document that ``interpret``
    turns into ``engine_version`` (and ``quantization`` where the server reports it) for
    every model of the target's ``modelserver_model_info``. ``base`` is the target's
    ``api_url``, else (``same_port``: the API shares the metrics port, as vLLM's does) the
    host of its metrics URL; without either nothing is asked. Asked until answered, then
    again whenever the target comes back up (a restart may be an upgrade)."""

    path: str
    interpret: IdentityInterpreter
    same_port: bool = False


@dataclass(frozen=True)
class Source:
    """One source kind (see module docstring).

    * ``kind`` — the ``kind:`` of a target, a ``--source`` choice; ``table`` — its mapping;
      ``components`` — the per-upstream tables ``table`` combines, for the docs (default:
      ``(table,)``), with ``component_names`` their display names;
    * ``claims(name, line)`` — whether an exposition line (``name`` is its sample name, or
      the family name of a HELP/TYPE line) is this source's; among the sources claiming
      lines of one exposition the lowest ``detect_priority`` wins;
    * ``readiness``, ``runtime_probe``, ``identity`` — what the sidecar probes (``None``:
      nothing);
    * ``default_port`` — where the server serves ``/metrics`` by default;
    * ``runtimes`` — the ``runtime`` label values its series can carry; ``llm_runtimes``
      — those of them whose models are LLMs (engines with their own scheduler);
    * ``openai_server`` — an LLM engine with an OpenAI-compatible API (vLLM, SGLang): its
      models are listed at ``/v1/models``, it has no per-model configuration, and the GPUs
      of its pod are its model's;
    * ``not_mapped`` — ``(upstream family, why)`` for families deliberately left unmapped.
    """

    kind: str
    table: SourceTable
    description: str
    claims: Callable[[str, str], bool]
    default_port: int
    detect_priority: int = 100
    readiness: ModelReadyProbe | HealthProbe | None = None
    runtime_probe: RuntimeProbe | None = None
    identity: IdentityProbe | None = None
    runtimes: tuple[str, ...] = ()
    llm_runtimes: tuple[str, ...] = ()
    openai_server: bool = False
    components: tuple[SourceTable, ...] = ()
    component_names: tuple[tuple[str, str], ...] = ()
    not_mapped: tuple[tuple[str, str], ...] = ()

    @property
    def backend(self) -> str:
        """The ``backend`` label of the series this source produces."""
        return self.table.backend

    def why_not_mapped(self, family: str) -> str | None:
        """Why the upstream ``family`` (as an exposition names it, e.g.
        ``vllm:request_params_n``) is left unmapped: the reason of the first ``not_mapped``
        entry that names it, or None. An entry's name may list several families
        (``"a, b"``), end in a parenthesised remark (``"vllm:x (older series)"``) and use
        ``*`` as a wildcard (``"vllm:kv_block_*_seconds"``)."""
        for names, why in self.not_mapped:
            for pattern in _patterns(names):
                if fnmatch.fnmatchcase(family, pattern):
                    return why
        return None

    @property
    def tables(self) -> tuple[SourceTable, ...]:
        """The per-upstream tables of the docs (``components``, else ``(table,)``)."""
        return self.components or (self.table,)


def _patterns(names: str) -> list[str]:
    """The family patterns of a ``not_mapped`` entry's name (see `Source.why_not_mapped`)."""
    out = []
    for part in names.split(", "):
        part = part.split(" (", 1)[0].strip()
        if part:
            out.append(part)
    return out


def unmapped_summary(source: Source | None, names: list[str], fate: str) -> str:
    """What the sidecar logs about the upstream families no rule maps (``fate``: what
    happens to them, "dropped" or "passed through"): those ``source`` leaves unmapped on
    purpose (`Source.why_not_mapped`: docs/metrics.md gives each reason) apart from those
    it does not know, the first 20 of each named, e.g. ``3 upstream families not mapped
    (dropped); 1 unknown to the mapping: x; 2 left unmapped on purpose, see
    docs/metrics.md: a, b``."""
    known = [f for f in names if source is not None and source.why_not_mapped(f)]
    unknown = [f for f in names if f not in set(known)]
    parts = []
    for label, group in (("unknown to the mapping", unknown),
                         ("left unmapped on purpose, see docs/metrics.md", known)):
        if group:
            more = f" … and {len(group) - 20} more" if len(group) > 20 else ""
            parts.append(f"{len(group)} {label}: {', '.join(group[:20])}{more}")
    return (f"{len(names)} upstream famil{'y' if len(names) == 1 else 'ies'} not mapped "
            f"({fate}); " + "; ".join(parts))
