"""Approval policy, the changes log, and which approvals a change still lacks.

The **policy** file says which change classes (:data:`~fleetwatch.governance.changes.
CHANGE_CLASSES`) need whose approval::

    approvals:
      quota: [platform]                 # a team's quota: the platform team
      engine_swap: [owner, platform]    # the model's owner and the platform team
      model_added: [platform]

An approver is a name the team agrees on (a team, a group); ``owner`` stands for the
model's owner as the registry names it (the new revision's entry, or the old one's for a
removed model), so only classes whose subject is a model may name it. A class the policy
does not name needs no approval.

The **changes log**, committed beside the governed files and appended in the same commit
as the change it approves::

    changes:
      - ticket: PLAT-1234
        change: quota:search            # the change's id, as `registry diff` prints it
        approver: platform              # for `owner`: the owner's address
        date: 2026-12-06

Both files are validated strictly (unknown keys, unknown classes, a missing field: a
:class:`GovernanceError` naming the file and the field). :func:`missing_approvals` gives
one :class:`Missing` per change and approver without a record; records already in the log
before the change (``base``) do not count, so an old approval cannot approve a new change.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetwatch.governance.changes import CLASS_NAMES, Change
from fleetwatch.specfile import load_yaml, validate

__all__ = ["OWNER", "ApprovalRecord", "GovernanceError", "Missing", "Policy",
           "missing_approvals", "parse_log", "parse_policy"]

#: The approver that stands for the model's owner.
OWNER = "owner"
#: Classes whose subject is not a model (``owner`` means nothing there).
NOT_MODELS = frozenset({"quota"})


class GovernanceError(ValueError):
    """An invalid policy or changes log; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PolicyFile(_Strict):
    approvals: dict[str, list[str]]


class ApprovalRecord(_Strict):
    """One record of the changes log: ``ticket``, ``change`` (an id ``CLASS:SUBJECT``),
    ``approver`` and ``date`` (``YYYY-MM-DD``)."""

    ticket: str = Field(min_length=1)
    change: str = Field(min_length=3, pattern=r"^[a-z_]+:.+$")
    approver: str = Field(min_length=1)
    date: dt.date

    @field_validator("change")
    @classmethod
    def _known_class(cls, v: str) -> str:
        # a typo'd class would approve nothing, silently: refuse it
        name = v.partition(":")[0]
        if name not in CLASS_NAMES:
            raise ValueError(f"{name!r} is not a change class (one of {', '.join(CLASS_NAMES)})")
        return v


class _LogFile(_Strict):
    changes: list[ApprovalRecord] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Policy:
    """Change class → the approvers it needs; :attr:`source` the file."""

    approvals: dict[str, tuple[str, ...]]
    source: str = "<memory>"

    def approvers(self, change: Change) -> tuple[str, ...]:
        """The approvers ``change`` needs, ``owner`` resolved to the model's owner (the
        literal ``owner`` when the registry names none)."""
        return tuple((change.owner or OWNER) if a == OWNER else a
                     for a in self.approvals.get(change.change_class, ()))


@dataclass(frozen=True, slots=True)
class Missing:
    """A change without a record for one approver it needs (``role``: the policy's word,
    ``owner`` or the approver's name)."""

    change: Change
    approver: str
    role: str

    def line(self, log: str) -> str:
        """The one-line finding ``registry check`` prints."""
        who = self.approver if self.role != OWNER else f"{self.approver} (the owner)"
        return (f"{self.change.id}: needs approval by {who}: no record in {log} "
                f"({self.change.describe()})")


def parse_policy(text: str, source: str = "<memory>") -> Policy:
    """Validate a policy file's text; raises :class:`GovernanceError` naming the field."""
    parsed = validate(_PolicyFile, _yaml(text, source), source, GovernanceError,
                      "a mapping with an 'approvals:' mapping")
    for cls, who in parsed.approvals.items():
        if cls not in CLASS_NAMES:
            raise GovernanceError(f"{source}: field 'approvals.{cls}': not a change class "
                                  f"(one of {', '.join(CLASS_NAMES)})")
        if OWNER in who and cls in NOT_MODELS:
            raise GovernanceError(f"{source}: field 'approvals.{cls}': a {cls} change has "
                                  "no model, so 'owner' names nobody: name a team")
        if any(not w for w in who):
            raise GovernanceError(f"{source}: field 'approvals.{cls}': an empty approver")
    return Policy({c: tuple(w) for c, w in parsed.approvals.items()}, source)


def parse_log(text: str, source: str = "<memory>") -> list[ApprovalRecord]:
    """Validate a changes log's text (empty text: no records)."""
    data = _yaml(text, source)
    if data is None:
        return []
    parsed = validate(_LogFile, data, source, GovernanceError, "a mapping with a 'changes:' list")
    return list(parsed.changes)


def _yaml(text: str, source: str) -> object:
    import yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        from fleetwatch.specfile import yaml_problem

        raise GovernanceError(f"{source}: not valid YAML: {yaml_problem(exc)}") from None


def missing_approvals(changes: Sequence[Change], policy: Policy,
                      records: Iterable[ApprovalRecord],
                      base: Iterable[ApprovalRecord] = ()) -> list[Missing]:
    """Each (change, approver) the policy asks for without a record in ``records`` that
    is not already in ``base`` (the log before the change)."""
    old = set(base)
    granted = {(r.change, r.approver) for r in records if r not in old}
    out = []
    for c in changes:
        roles = policy.approvals.get(c.change_class, ())
        for role, who in zip(roles, policy.approvers(c), strict=True):
            if (c.id, who) not in granted:
                out.append(Missing(c, who, role))
    return out

