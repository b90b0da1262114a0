"""The governed files' revisions as ``fleetwatch registry`` reads them: a path, or a git
revision of one, ``git:REV:PATH`` — read with ``git show REV:PATH`` in the current folder,
so ``PATH`` is from the repository's root, or ``./PATH`` from the current folder (git's own
rule) — validated into a registry, a placement (the ``placement:`` list of any YAML file,
e.g. a sidecar configuration) or quotas, and diffed (:func:`changes_between`). Every
failure is a :class:`SpecError` naming the file (and the field), or git's own message.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from fleetwatch.governance.changes import Change, diff_governed
from fleetwatch.gpu.quota import QuotaError, Quotas, parse_quotas
from fleetwatch.labels.placement import GPUPlacement, PlacementList
from fleetwatch.labels.registry import Registry, RegistryError, parse_registry
from fleetwatch.specfile import format_validation_error, load_yaml

#: Bytes ``git show`` may return for one file (a governed file is YAML a person edits).
MAX_FILE_BYTES = 64 * 1024 * 1024
GIT_PREFIX = "git:"


class SpecError(ValueError):
    """A file argument that cannot be read (the message names it)."""


def _git(spec: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``git ARGS`` (options first, then ``--end-of-options`` and the revision, so a
    revision is never read as an option); a git that cannot run is a :class:`SpecError`."""
    try:
        return subprocess.run(["git", *args], capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"{spec}: cannot run git: {exc}") from None


def _git_error(spec: str, what: str, done: subprocess.CompletedProcess[bytes]) -> SpecError:
    return SpecError(f"{spec}: {what}: " + done.stderr.decode("utf-8", "replace").strip())


def _read_git(spec: str, missing_ok: bool) -> bytes:
    """The bytes of ``git:REV:PATH``; see :func:`read_spec`."""
    rev, sep, path = spec[len(GIT_PREFIX):].partition(":")
    if not sep or not rev or not path:
        raise SpecError(f"{spec}: expected git:REV:PATH (e.g. git:HEAD~1:models.yaml)")
    if rev.startswith("-"):
        raise SpecError(f"{spec}: a revision cannot start with '-' (expected "
                        "git:REV:PATH, e.g. git:HEAD~1:models.yaml)")
    if missing_ok:
        # only a path absent in a revision that exists is a file not created yet
        probe = _git(spec, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{tree}}")
        if probe.returncode != 0:
            raise _git_error(spec, f"no revision {rev!r} here", probe)
        if _git(spec, "cat-file", "-e", "--end-of-options", f"{rev}:{path}").returncode:
            return b""
    done = _git(spec, "show", "--end-of-options", f"{rev}:{path}")
    if done.returncode != 0:
        raise _git_error(spec, "git show", done)
    return done.stdout


def read_spec(spec: str, missing_ok: bool = False) -> str:
    """The text of ``spec``: a path, or ``git:REV:PATH`` (``git show``). ``missing_ok``:
    a path absent in a revision that exists reads as ``""`` (a file the change creates);
    a revision that does not exist, or a plain path that does not exist, is still an
    error. Raises :class:`SpecError` naming ``spec``."""
    if spec.startswith(GIT_PREFIX):
        data = _read_git(spec, missing_ok)
    else:
        try:
            data = Path(spec).read_bytes()
        except OSError as exc:
            raise SpecError(f"{spec}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(f"{spec}: larger than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{spec}: not UTF-8 text (byte {exc.start})") from None


def _yaml(spec: str, text: str) -> object:
    import yaml

    from fleetwatch.specfile import yaml_problem

    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{spec}: not valid YAML: {yaml_problem(exc)}") from None


def load_registry_spec(spec: str) -> Registry:
    """A registry from a path or ``git:REV:PATH``."""
    try:
        return parse_registry(_yaml(spec, read_spec(spec)), spec)
    except RegistryError as exc:
        raise SpecError(str(exc)) from None


def load_quota_spec(spec: str) -> Quotas:
    """A quota file from a path or ``git:REV:PATH``."""
    try:
        return parse_quotas(_yaml(spec, read_spec(spec)), spec)
    except QuotaError as exc:
        raise SpecError(str(exc)) from None


class _PlacementFile(BaseModel):
    """Any YAML mapping's ``placement:`` list (other keys are the file's own business)."""

    model_config = ConfigDict(extra="ignore")

    placement: PlacementList | None = None


def load_placement_spec(spec: str) -> list[GPUPlacement]:
    """The ``placement:`` list of a YAML file (a sidecar configuration), validated as
    ``fleetwatch validate`` validates it (:data:`~fleetwatch.labels.placement.
    PlacementList`: each GPU valid and listed once)."""
    data = _yaml(spec, read_spec(spec))
    if not isinstance(data, dict):
        raise SpecError(f"{spec}: expected a mapping with a 'placement:' list")
    try:
        return _PlacementFile.model_validate(data).placement or []
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, spec)) from None


@dataclass(frozen=True, slots=True)
class Revisions:
    """The governed files of one side: the registry, and optionally placement and quotas."""

    registry: str
    placement: str | None = None
    quotas: str | None = None


def changes_between(old: Revisions, new: Revisions) -> list[Change]:
    """Every change between two revisions (:func:`fleetwatch.governance.changes.
    diff_governed`); raises :class:`SpecError`."""
    placement = ((load_placement_spec(old.placement), load_placement_spec(new.placement))
                 if old.placement and new.placement else ([], []))
    quotas = ((load_quota_spec(old.quotas), load_quota_spec(new.quotas))
              if old.quotas and new.quotas else (None, None))
    return diff_governed(load_registry_spec(old.registry), load_registry_spec(new.registry),
                         placement, quotas)
