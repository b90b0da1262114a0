"""``fleetwatch registry diff | check | log``: reviewing changes to the governed files (the
registry, the placement, the quota file) and their approvals
(:mod:`fleetwatch.governance`).

Every file argument is a path or a git revision of one, ``git:REV:PATH``
(:mod:`.revisions`). ``check`` reads the changes log and, with
``--changes-base``, the log before the change: a record already there does not approve
this change. A log absent in the base revision (``--changes-base git:REV:PATH``, ``REV``
existing) reads as empty: the change creates it. A base revision that does not exist, or
a plain base file that does not exist, exits 2 naming it, so no record is taken for new.

Exit codes: 0 ok; 1 ``check`` found changes without approval (one line each); 2 a file
that cannot be read or is invalid (naming it and the field), or git failing (its message).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fleetwatch.commands.common import EXIT_RUNTIME
from fleetwatch.commands.common import fail as _fail
from fleetwatch.commands.revisions import Revisions, SpecError, changes_between, read_spec
from fleetwatch.governance.approvals import (
    GovernanceError,
    missing_approvals,
    parse_log,
    parse_policy,
)


def _sides(old: str, new: str, placement: tuple[str, str] | None,
           quotas: tuple[str, str] | None) -> tuple[Revisions, Revisions]:
    return (Revisions(old, placement[0] if placement else None, quotas[0] if quotas else None),
            Revisions(new, placement[1] if placement else None, quotas[1] if quotas else None))


def _file_options(f: Any) -> Any:
    f = click.option("--quotas", nargs=2, default=None, metavar="OLD NEW",
                     help="The quota file's two revisions.")(f)
    f = click.option("--placement", nargs=2, default=None, metavar="OLD NEW",
                     help="Two revisions of a file with a 'placement:' list.")(f)
    f = click.argument("new")(f)
    return click.argument("old")(f)


@click.group()
def registry() -> None:
    """Review changes to the registry, placement and quotas, and their approvals."""


@registry.command("diff")
@_file_options
def diff(old: str, new: str, placement: tuple[str, str] | None,
         quotas: tuple[str, str] | None) -> None:
    """What changed from OLD to NEW (files or git:REV:PATH), one change per line:
    its id CLASS:SUBJECT, then each field old → new."""
    try:
        changes = changes_between(*_sides(old, new, placement, quotas))
    except SpecError as exc:
        _fail(str(exc))
    for c in changes:
        click.echo(f"{c.id}\t{c.describe()}")
    click.echo(f"{len(changes)} change{'' if len(changes) == 1 else 's'}", err=True)


@registry.command("check")
@_file_options
@click.option("--approvals", "policy_path", required=True,
              help="The approval policy (approvals: class → approvers).")
@click.option("--changes", "log_spec", required=True,
              help="The changes log as of NEW (ticket, change, approver, date).")
@click.option("--changes-base", "base_spec", default=None,
              help="The changes log as of OLD: its records do not approve this change.")
def check(old: str, new: str, placement: tuple[str, str] | None,
          quotas: tuple[str, str] | None, policy_path: str, log_spec: str,
          base_spec: str | None) -> None:
    """Exit 1 with one line per approval the policy asks for and the log lacks.
    \f
    Many parameters: one per option, passed by click."""
    try:
        changes = changes_between(*_sides(old, new, placement, quotas))
        policy = parse_policy(read_spec(policy_path), policy_path)
        records = parse_log(read_spec(log_spec), log_spec)
        base = parse_log(read_spec(base_spec, missing_ok=True), base_spec) if base_spec else []
    except (SpecError, GovernanceError) as exc:
        _fail(str(exc))
    missing = missing_approvals(changes, policy, records, base)
    for m in missing:
        click.echo(m.line(log_spec))
    if missing:
        raise SystemExit(EXIT_RUNTIME)
    click.echo(f"{len(changes)} change{'' if len(changes) == 1 else 's'}, every approval "
               "recorded", err=True)


@registry.command("log")
@click.option("--changes", "log_path", required=True, help="The changes log (a path).")
@click.option("--max-commits", type=click.IntRange(1, 100_000), default=1000,
              show_default=True, help="Commits of the log's history read at most.")
def log(log_path: str, max_commits: int) -> None:
    """The approval history: each record with the commit that added it (date, author,
    subject), oldest first; records not committed yet say so."""
    from fleetwatch.commands.registry_log import history

    try:
        for line in history(Path(log_path), max_commits):
            click.echo(line)
    except (SpecError, GovernanceError) as exc:
        _fail(str(exc))
