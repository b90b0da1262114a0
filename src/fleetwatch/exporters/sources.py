"""The source kinds a target can declare, their mapping tables, and auto-detection."""

from __future__ import annotations

from fleetwatch.exporters import dcgm, triton, triton_trtllm, triton_vllm, vllm
from fleetwatch.exporters.mapping import SourceTable

#: A Triton target carries core metrics plus whatever its LLM backends publish.
TRITON = triton.TABLE.combine(triton_vllm.TABLE, triton_trtllm.TABLE, kind="triton")

#: An exposition of a server fleetwatch has no mapping for (SGLang, TGI, …): every family
#: is counted as unmapped (and passed through when pass-through is on).
UNKNOWN = SourceTable(kind="unknown", backend="unknown", rules=(),
                      description="no mapping: everything is unmapped")

TABLES: dict[str, SourceTable] = {
    "triton": TRITON,
    "vllm": vllm.TABLE,
    "dcgm": dcgm.TABLE,
    "unknown": UNKNOWN,
}

#: The per-source modules, for documentation (docs/metrics.md).
COMPONENT_TABLES: tuple[SourceTable, ...] = (
    triton.TABLE, triton_vllm.TABLE, triton_trtllm.TABLE, vllm.TABLE, dcgm.TABLE,
)

KINDS = ("auto", "triton", "vllm", "dcgm")


def detect_kind(text: str) -> str:
    """Detect the source kind of an exposition body: ``triton``, ``vllm``, ``dcgm``.

    Looks at metric names at line starts (samples or HELP/TYPE): ``nv_`` → Triton;
    ``vllm:``/``vllm_`` samples labelled ``model=…``/``version=…`` (no ``model_name``) →
    Triton's vLLM backend, hence Triton; otherwise vLLM; ``DCGM_FI_`` → dcgm-exporter.
    Returns ``unknown`` when nothing matches (SGLang, TGI, an HTML page …).
    """
    has = {"triton": False, "vllm": False, "dcgm": False}
    for line in text.split("\n", 20000)[:20000]:
        name = line
        if line.startswith("# "):
            parts = line.split(None, 3)
            if len(parts) < 3:
                continue
            name = parts[2]
        if name.startswith("nv_"):
            has["triton"] = True
            break
        if name.startswith(("vllm:", "vllm_", "ray_vllm")):
            if 'version="' in line and 'model="' in line and "model_name=" not in line:
                has["triton"] = True
                break
            has["vllm"] = True
        elif name.startswith("DCGM_FI_"):
            has["dcgm"] = True
    for kind in ("triton", "vllm", "dcgm"):
        if has[kind]:
            return kind
    return "unknown"
