"""What every command shares: the error line and exit code, logging, loading the registry
and the SLO file with their errors mapped to exit 2.

Exit codes: 0 ok; 2 bad input or configuration (the message names the file and the field);
1 a runtime failure (e.g. an output that cannot be written, a port that is taken).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from fleetwatch.files import write_tree
from fleetwatch.labels.registry import Registry, RegistryError, load_registry

if TYPE_CHECKING:
    from fleetwatch.slo.spec import SLOFile

EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 1


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``fleetwatch: error: MESSAGE`` on stderr and exit with ``code``."""
    click.echo(f"fleetwatch: error: {message}", err=True)
    sys.exit(code)


def setup_logging(level: str) -> None:
    """One log line per event: ``time LEVEL logger: message`` at ``level`` (a logging name)."""
    logging.basicConfig(level=getattr(logging, level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def registry_or_fail(path: str | None, where: str = "") -> Registry:
    """Load a registry (an empty one without ``path``); ``where`` (e.g. ``sidecar.yaml:
    registry``) prefixes each error line. Exits 2 on a :class:`RegistryError`."""
    if not path:
        return Registry()
    try:
        return load_registry(path)
    except RegistryError as exc:
        fail("\n".join(f"{where}: {line}" if where else line
                       for line in str(exc).splitlines()))


def slo_file_or_fail(path: str) -> SLOFile:
    """Load an SLO file; exits 2 with the file, SLO and field on an ``SLOSpecError``."""
    from fleetwatch.slo.spec import SLOSpecError, load_slo_file

    try:
        return load_slo_file(path)
    except SLOSpecError as exc:
        fail(str(exc))


def write_or_fail(files: Mapping[str, str], out_dir: str | Path) -> list[Path]:
    """Write a generated file tree (:func:`fleetwatch.files.write_tree`); exits 1 naming the
    path on an ``OSError``, and when ``out_dir`` exists but is not a directory."""
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        fail(f"{out_dir}: cannot write: not a directory", code=EXIT_RUNTIME)
    try:
        return write_tree(files, out_dir)
    except OSError as exc:
        where = exc.filename or out_dir
        fail(f"{where}: cannot write: {exc.strerror or exc}", code=EXIT_RUNTIME)


def write_generated(files: Mapping[str, str], out_dir: str) -> None:
    """Write a generator's file tree to ``--out`` (:func:`write_or_fail`) and say so in one
    line, ``wrote N files to DIR``: the report of every command that writes a folder."""
    write_or_fail(files, out_dir)
    n = len(files)
    click.echo(f"wrote {n} file{'' if n == 1 else 's'} to {out_dir}")
