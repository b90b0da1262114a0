"""fleetwatch: one observability and SLO layer for Triton, vLLM and dcgm-exporter."""

__version__ = "0.1.0"
