"""``fleetwatch registry log``: the approval history, from the changes log and git.

Each record of the changes log (:mod:`fleetwatch.governance.approvals`) is printed with the
commit that added it — the first commit of the log's history (``git log --follow``) whose
revision of the log holds it — so the history is the repository's: who committed the
change and its approval, when, and with which message. A record in the file but in no
commit is printed as ``(not committed)``. Lines, oldest first::

    2026-12-06  quota:search  approved by platform  ticket PLAT-1  commit 1a2b3c4
    2026-12-06 Alice <a@example.com>: raise search's quota

(one line each; wrapped here).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from fleetwatch.commands.revisions import SpecError
from fleetwatch.governance.approvals import ApprovalRecord, parse_log


def _git(args: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"{cwd}: cannot run git: {exc}") from None
    if done.returncode != 0:
        raise SpecError(f"git {' '.join(args)} (in {cwd}): "
                        + done.stderr.decode("utf-8", "replace").strip())
    return done.stdout.decode("utf-8", "replace")


def _line(r: ApprovalRecord, where: str) -> str:
    return (f"{r.date.isoformat()}  {r.change}  approved by {r.approver}  "
            f"ticket {r.ticket}  {where}")


def history(path: Path, max_commits: int) -> Iterator[str]:
    """The history's lines (see the module doc); raises :class:`SpecError` when git
    fails or ``GovernanceError`` for a revision of the log that is invalid."""
    cwd, name = path.resolve().parent, path.name
    commits = _git(["log", f"--max-count={max_commits}", "--date=short",
                    "--format=%H%x09%ad%x09%an <%ae>%x09%s", "--", name], cwd).splitlines()
    seen: set[ApprovalRecord] = set()
    for row in reversed(commits):
        sha, date, author, subject = [*row.split("\t", 3), "", "", ""][:4]
        text = _git(["show", f"{sha}:./{name}"], cwd) if _exists(sha, name, cwd) else ""
        for r in parse_log(text, f"{path} at {sha[:7]}"):
            if r not in seen:
                seen.add(r)
                yield _line(r, f"commit {sha[:7]} {date} {author}: {subject}")
    try:
        current = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read: {exc}") from None
    for r in parse_log(current, str(path)):
        if r not in seen:
            yield _line(r, "(not committed)")


def _exists(sha: str, name: str, cwd: Path) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{sha}:./{name}"], cwd=cwd,
                          capture_output=True, check=False, timeout=60).returncode == 0
