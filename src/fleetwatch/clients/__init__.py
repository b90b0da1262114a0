"""Clients of the model servers, shared by the production commands (``fleetwatch warmup``:
:mod:`fleetwatch.commands.warmup`) and the demo (:mod:`fleetwatch.demo`).

* :mod:`.openai` — one timed request to an OpenAI-compatible server (vLLM's
  ``/v1/completions``, ``/v1/chat/completions``; streamed or not) and word prompts;
* :mod:`.triton` — bounded runs of Triton requests (unary over HTTP or gRPC, decoupled
  over a gRPC stream), loopback only.

Importing this package imports none of them (aiohttp, numpy and tritonclient load with the
module that needs them).
"""
