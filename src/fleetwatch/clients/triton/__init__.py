"""Bounded Triton clients (loopback only; ``tritonclient``, the ``triton`` extra).

Every call is bounded twice, by a request count and by a duration (:mod:`.bounds`).
:func:`~fleetwatch.clients.triton.unary.send_requests` (:mod:`.unary`) sends unary
requests over HTTP (``tritonclient.http``) or gRPC (``tritonclient.grpc``);
:func:`~fleetwatch.clients.triton.stream.stream_requests` (:mod:`.stream`) drives a
decoupled model over a gRPC bidirectional stream and also records the time to the first
response. Each worker thread owns its client. A request's tensors come from an
:data:`~fleetwatch.clients.triton.tensors.InputFactory` (:mod:`.tensors`); a run reports a
:class:`~fleetwatch.clients.triton.results.LoadResult` (:mod:`.results`).
"""
