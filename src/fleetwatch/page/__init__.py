"""The status page: one self-contained HTML document (inline CSS and SVG, no JavaScript,
no external asset) of the targets, models, SLO states and autoscaling signals.

Pure: :func:`~fleetwatch.page.render.render_page` turns a :class:`~fleetwatch.page.model.PageInput`
(the ``/slo`` and ``/autoscaling`` documents plus target and registry facts) into HTML.
The sidecar serves it on ``GET /`` (:mod:`fleetwatch.sidecar.page_route`) and
``fleetwatch slo report --html`` writes it from Prometheus
(:mod:`fleetwatch.commands.slo_html`). Every upstream and registry value is escaped.
"""
