"""Triton's vLLM backend: ``vllm:*`` families re-exported on Triton's ``:8002/metrics``.

Source: ``docs/sources.md`` § Triton's vLLM backend (triton-inference-server/vllm_backend
``src/utils/metrics.py``, r24.08 → r25.11). The backend publishes 8 vLLM families through
``pb_utils.MetricFamily`` with Triton's ``{model, version}`` labels only (no
``model_name``, ``engine`` or ``finished_reason``), and only with ``REPORT_CUSTOM_METRICS:
"true"``. The rules are the standalone vLLM rules for the same names (one table, no copy);
the ``runtime`` label comes from the model's Triton configuration like every other series
of that model (``vllm`` for ``backend: "vllm"``), so all of a model's series agree. The
backend's ``vllm:time_per_output_token_seconds`` holds inter-token latencies (one
observation per token gap), so it maps to ITL.

Not available through Triton (``docs/sources.md``): running/waiting requests, KV-cache usage,
prefix-cache hits, queue time, finish reasons.
"""

from __future__ import annotations

from dataclasses import replace

from fleetwatch.exporters.sources.vllm import SHARED_RULES
from fleetwatch.exporters.table import SourceTable

TABLE = SourceTable(
    kind="triton_vllm_backend",
    backend="triton",
    rules=tuple(replace(rule, runtime=None) for rule in SHARED_RULES),
    description="Triton vLLM backend (vllm:* with model/version labels), r24.08+",
)
