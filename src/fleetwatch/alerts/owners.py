"""The owner join of alert expressions: the registry's ``team, owner, oncall`` read at query
time from the sidecars' ``modelserver_model_info`` (a registry edit takes effect without
regenerating rules)."""

from __future__ import annotations

import fnmatch

from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.promql import block, string
from fleetwatch.slo.spec import SLOSpec

OWNER_LABELS = ("team", "owner", "oncall")

#: One registry series per (model, model_version), whatever the number of sidecars: the
#: sidecars' ``modelserver_model_info`` reduced to its registry labels, and ``topk`` so that
#: a registry roll-out (two teams for a moment) can never make the join fail.
MODEL_OWNER = ("topk by (model, model_version) (1, group by (model, model_version, team, "
               "owner, oncall) (modelserver_model_info))")


def with_owner(expr: str, fallback_team: str) -> str:
    """``expr`` (a PromQL expression whose series have ``model, model_version`` labels) plus
    the registry's ``team, owner, oncall`` joined at query time from
    ``modelserver_model_info``.

    Series without a registry entry (or whose info series is gone, e.g. while their
    upstream is down) are kept, not dropped: they get ``team=<fallback_team>``.
    """
    inner = block(expr, "    ")
    return (f"label_replace(\n  (\n{inner}\n  )\n"
            f"  * on (model, model_version) group_left ({', '.join(OWNER_LABELS)})\n"
            f"    {MODEL_OWNER}\n"
            f"  or ignoring ({', '.join(OWNER_LABELS)})\n  (\n{inner}\n  ),\n"
            f"  \"team\", {string(fallback_team)}, \"team\", \"\"\n)")


#: The registry labels per model name (any version): for series without ``model_version``.
MODEL_NAME_OWNER = ("topk by (model) (1, group by (model, team, owner, oncall) "
                    "(modelserver_model_info))")


def with_model_owner(expr: str, fallback_team: str) -> str:
    """As :func:`with_owner`, for an ``expr`` whose series have a ``model`` label but no
    ``model_version`` (e.g. ``fleetwatch_config_drift``): joined on the model name."""
    inner = block(expr, "    ")
    return (f"label_replace(\n  (\n{inner}\n  )\n"
            f"  * on (model) group_left ({', '.join(OWNER_LABELS)})\n"
            f"    {MODEL_NAME_OWNER}\n"
            f"  or ignoring ({', '.join(OWNER_LABELS)})\n  (\n{inner}\n  ),\n"
            f"  \"team\", {string(fallback_team)}, \"team\", \"\"\n)")


def slo_team(slo: SLOSpec, registry: Registry, platform_team: str) -> ModelEntry | str:
    """Who owns an SLO as a whole (for alerts without a model): the one registry entry
    or team its selector can match, else the platform team."""
    sel = slo.selector
    entries = []
    for e in registry.entries:
        if sel.teams and e.team not in sel.teams:
            continue
        if sel.latency_tiers and e.latency_tier not in sel.latency_tiers:
            continue
        if sel.models and not any(fnmatch.fnmatchcase(e.name, g) or fnmatch.fnmatchcase(g, e.name)
                                  for g in sel.models):
            continue
        entries.append(e)
    owners = {(e.team, e.owner, e.oncall) for e in entries}
    if len(owners) == 1:
        return entries[0]
    teams = {e.team for e in entries} | set(sel.teams)
    return teams.pop() if len(teams) == 1 else platform_team
