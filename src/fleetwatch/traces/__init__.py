"""Per-request facts from OpenTelemetry traces (OTLP) of Triton and vLLM.

Pure (no I/O, no engine): :mod:`.otlp` decodes an OTLP/HTTP export body (protobuf or JSON,
gzip) into :class:`~fleetwatch.traces.spans.Span` values; :mod:`.join` joins Triton's spans
of one request by trace id in a bounded buffer; :mod:`.facts` turns a joined request into
:class:`~fleetwatch.traces.facts.RequestFacts` (seconds, tokens); :mod:`.concurrency`
estimates the load each request saw from the spans themselves; :mod:`.judge` judges each
request against every latency or goodput objective of the SLOs selecting its model;
:mod:`.histograms` accumulates the normalized latency histograms traces give; and
:mod:`.semconv` derives the OpenTelemetry names (GenAI semantic conventions for LLM models,
``modelserver.*`` otherwise) of the whole normalized schema, for the OTLP metrics export.

The sidecar's receiver (``/v1/traces``, forwarding) lives in :mod:`fleetwatch.sidecar.otlp`,
the OTLP metrics export in :mod:`fleetwatch.sidecar.otlp_metrics`.
"""
