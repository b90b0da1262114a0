"""Writing alert labels and annotations: Prometheus evaluates both as Go templates, so
values from the registry or the configuration go through :func:`literal`, and the
generator's own actions are the constants below (the subset
:func:`fleetwatch.alerts.gotemplate.render_template` evaluates)."""

from __future__ import annotations

import urllib.parse

from fleetwatch.alerts.config import URLTemplates
from fleetwatch.alerts.rules import Labels
from fleetwatch.promql import string

#: The alert's value, 3 significant digits.
VALUE = '{{ printf "%.3g" $value }}'
#: The alert's value (a ratio) as a percentage.
PERCENT = "{{ $value | humanizePercentage }}"
#: Owner sentence: the joined registry labels, or a note when the model has none.
OWNER = ("{{ with $labels.owner }}Owner {{ . }}, on-call {{ $labels.oncall }}."
         "{{ else }}No registry entry is known for this model.{{ end }}")


def label(name: str) -> str:
    """``{{ $labels.<name> }}``."""
    return f"{{{{ $labels.{name} }}}}"


#: ``<model> version <v> on <backend>`` (the version only when the series has one).
MODEL = (f"{label('model')}{{{{ with $labels.model_version }}}} version {{{{ . }}}}{{{{ end }}}} "
         f"on {label('backend')}")


def literal(value: str) -> str:
    """``value`` as literal text of a Prometheus template (alert labels and annotations are
    Go templates): a registry or configuration value with ``{{`` — or a ``{`` that could
    meet one of the generator's own actions — becomes a string action, ``{{ "…" }}``, which
    renders as the value itself; anything else is written as it is."""
    return "{{ " + string(value) + " }}" if "{" in value else value


def _url(template: str, alertname: str, static: dict[str, str]) -> str:
    """A URL annotation: placeholders become the alert's labels, query-escaped (``urlquery``:
    a model ``a&b #c`` must not add a parameter or end the URL)."""
    out = template.replace("{alertname}", alertname)
    for name in ("slo", "model", "model_version", "backend", "team"):
        value = (urllib.parse.quote_plus(static[name]) if name in static
                 else f"{{{{ $labels.{name} | urlquery }}}}")
        out = out.replace("{" + name + "}", value)
    return out


def alert_annotations(urls: URLTemplates, alertname: str, summary: str, description: str,
                static: dict[str, str] | None = None, autoscaler: bool = False) -> Labels:
    """``summary``, ``description`` and the configured URL annotations (runbook, dashboard,
    and with ``autoscaler`` the autoscaler's); ``static`` holds label values known at
    generation time (``slo``), written into URLs instead of a template action."""
    static = static or {}
    out = [("summary", summary), ("description", description)]
    if urls.runbook:
        out.append(("runbook_url", _url(urls.runbook, alertname, static)))
    if urls.dashboard:
        out.append(("dashboard_url", _url(urls.dashboard, alertname, static)))
    if autoscaler and urls.autoscaler:
        out.append(("autoscaler_url", _url(urls.autoscaler, alertname, static)))
    return tuple(out)
