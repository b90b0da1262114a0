"""OpenTelemetry (OTLP/HTTP) in and out of the sidecar, one concept per module.

* :mod:`.config` — the ``traces:`` and ``metrics_export:`` sections of the sidecar
  configuration (pydantic models);
* :mod:`.decode` — an OTLP/HTTP trace export body (protobuf or JSON, gzip, bounded) to
  :class:`~fleetwatch.otlp.decode.Span` values, or a refusal with its reason and status;
* :mod:`.receiver` — the trace receiver (``POST /v1/traces`` on its own port): decoding,
  forwarding, joining into requests (:mod:`fleetwatch.traces`), its ``fleetwatch_traces_*``
  metrics;
* :mod:`.semconv` — the OpenTelemetry names, units, attributes and buckets of the
  normalized schema (GenAI semantic conventions for LLM models, ``modelserver.*``
  otherwise);
* :mod:`.metrics_export` — the opt-in OTLP metrics export of the normalized schema and the
  per-request trace histograms (needs the ``otel`` extra: opentelemetry-sdk);
* :mod:`.start` — starting the configured parts on the sidecar's event loop.

Importing this package imports none of them; every module but :mod:`.metrics_export`
works with ``pip install fleetwatch`` alone.
"""
