"""Pieces every fleetwatch dashboard shares: template variables, the dashboard shell, links,
and the queries that join registry metadata (``modelserver_model_info``)."""

from __future__ import annotations

from collections.abc import Sequence

from grafanalib import core as g

from fleetwatch.dashboards.panels import DATASOURCE
from fleetwatch.promql import agg, by, sel

#: Grafana's schema version of the generated JSON (Grafana 10.4; the panels are written in
#: the Grafana 8+ form, so no migration has to run on import).
SCHEMA_VERSION = 39
TAGS = ["fleetwatch", "generated"]
INFO = "modelserver_model_info"
#: Matchers of the model-detail variables: the selected model, version and backend.
MODEL_VARS = {"model": "$model", "model_version": "$version", "backend": "$backend"}
#: Labels of a model's identity (what recording rules keep).
MODEL_KEY = ("model", "model_version", "backend")

UIDS = {
    "fleet": "fleetwatch-fleet",
    "model": "fleetwatch-model",
    "slos": "fleetwatch-slos",
    "gpus": "fleetwatch-gpus",
    "rollout": "fleetwatch-rollout",
}
TITLES = {
    "fleet": "fleetwatch / Fleet overview",
    "model": "fleetwatch / Model detail",
    "slos": "fleetwatch / SLOs",
    "gpus": "fleetwatch / GPUs and capacity",
    "rollout": "fleetwatch / Rollouts",
}


# -- template variables -----------------------------------------------------------------------


def variable(name: str, label: str, query: str, *, multi: bool = True,
             all_value: str | None = None) -> g.Template:
    """A Prometheus query variable starting on "All"."""
    t = g.Template(name=name, label=label, query=query, dataSource=DATASOURCE,
                   includeAll=True, multi=multi, allValue=all_value,
                   refresh=g.REFRESH_ON_TIME_RANGE_CHANGE, sort=g.SORT_ALPHA_ASC)
    # grafanalib writes a default as both text and value; "All" needs its own form
    t._current = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return t


def datasource_variable() -> g.Template:
    return g.Template(name="datasource", label="Data source", query="prometheus",
                      type="datasource", refresh=g.REFRESH_ON_DASHBOARD_LOAD)


def team_variable() -> g.Template:
    # unregistered models have team="" and are selected by "All" (.*) only
    return variable("team", "Team", f"label_values({INFO}, team)", all_value=".*")


def model_variable() -> g.Template:
    # "All" expands to the listed models, so the team filter applies
    return variable("model", "Model", f'label_values({INFO}{{team=~"$team"}}, model)')


def version_variable() -> g.Template:
    return variable("version", "Version",
                    f'label_values({INFO}{{model=~"$model"}}, model_version)', all_value=".*")


def backend_variable() -> g.Template:
    return variable("backend", "Backend",
                    f'label_values({INFO}{{model=~"$model"}}, backend)', all_value=".*")


# -- registry joins ---------------------------------------------------------------------------


def info_dedup(matchers: dict[str, str] | None = None,
               labels: Sequence[str] = ("team",)) -> str:
    """``modelserver_model_info`` once per model key (replicas deduplicated), keeping
    ``labels``; for ``* on (model, model_version, backend) group_left(...)`` joins."""
    return agg("max", (*MODEL_KEY, *labels), sel(INFO, re_=matchers))


def of_team(expr: str) -> str:
    """Keep the series of ``expr`` whose model belongs to the selected teams."""
    return f"({expr}) and on {by(MODEL_KEY)} {sel(INFO, re_={'team': '$team'})}"


def with_team(expr: str) -> str:
    """Add the ``team`` label to every series of ``expr`` (a per-model series), keeping the
    selected teams only."""
    return f"({expr}) * on {by(MODEL_KEY)} group_left(team) {info_dedup({'team': '$team'})}"


def slo_state_code(matchers: dict[str, str], labels: Sequence[str] = MODEL_KEY,
                   eq: dict[str, str] | None = None) -> str:
    """The SLO state as one number (see ``panels.STATE_CODES``): 6 regression,
    5 gpu_degraded, 4 interference, 3 misconfigured, 2 overload, 1 ok, 0 no data; the
    highest over replicas and SLOs wins.
    ``matchers`` are regex matchers, ``eq`` exact ones."""
    codes = (("regression", 6), ("gpu_degraded", 5), ("interference", 4),
             ("misconfigured", 3), ("overload", 2), ("ok", 1), ("no_data", 0))
    parts = [f"({sel('fleetwatch_slo_state', eq={**(eq or {}), 'state': s}, re_=matchers)}"
             f" * {c})" for s, c in codes]
    return agg("max", labels, " or ".join(parts))


# -- the dashboard shell ----------------------------------------------------------------------


def links() -> list[g.DashboardLink]:
    return [g.DashboardLink(title="fleetwatch dashboards", type="dashboards", tags=["fleetwatch"],
                            asDropdown=True, keepTime=True, includeVars=True,
                            uri="", icon="external link")]


def dashboard(key: str, description: str, panels: list[g.Panel],
              variables: list[g.Template]) -> g.Dashboard:
    """The common shell: uid, title, tags, links, time, refresh, schema version; panel ids
    assigned in layout order."""
    return g.Dashboard(
        title=TITLES[key], uid=UIDS[key], description=description, tags=list(TAGS),
        panels=panels, templating=g.Templating(list=variables), links=links(),
        time=g.Time("now-3h", "now"), refresh="30s", timezone="browser",
        schemaVersion=SCHEMA_VERSION, graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        editable=False,
    ).auto_panel_ids()
