"""Per-request facts from OpenTelemetry traces (OTLP) of Triton and vLLM.

Pure (no I/O, no engine), from :class:`~fleetwatch.traces.spans.Span` values
(:mod:`.spans`; :mod:`fleetwatch.otlp.decode` decodes them from export bodies):
:mod:`.join` joins Triton's spans of one request by trace id in a bounded buffer;
:mod:`.facts` turns a joined request into
:class:`~fleetwatch.traces.facts.RequestFacts` (seconds, tokens); :mod:`.concurrency`
estimates the load each request saw from the spans themselves; :mod:`.judge` judges each
request against every latency or goodput objective of the SLOs selecting its model;
and :mod:`.histograms` accumulates the normalized latency histograms traces give.

The OTLP side — decoding export bodies into spans, the sidecar's receiver
(``/v1/traces``, forwarding), the OpenTelemetry names of the schema and the OTLP metrics
export — is :mod:`fleetwatch.otlp`.
"""
