"""The replica model fitted from the committed real-vLLM sweep, shared by the twin's tests."""

from __future__ import annotations

import pytest

from fleetwatch.autoscale.replica import ReplicaModel
from fleetwatch.autoscale.trace import Request, read_azure_csv
from fleetwatch.commands.autoscale import capture_paths, fit
from fleetwatch.slo.spec import SLOSpec, load_slo_file
from tests.support.helpers import ROOT

AZURE = ROOT / "tests" / "data" / "workloads" / "AzureLLMInferenceTrace_code.csv"
SWEEP = ROOT / "tests" / "data" / "vllm-sweep" / "captures"
DEMO_SLOS = ROOT / "src" / "fleetwatch" / "demo" / "slos.yaml"


@pytest.fixture(scope="session")
def azure() -> list[Request]:
    with AZURE.open(encoding="utf-8") as f:
        return read_azure_csv(f)


@pytest.fixture(scope="session")
def sweep_fit() -> tuple[ReplicaModel, SLOSpec, float]:
    """(replica model, the demo's TTFT SLO, the capacity the engine learned)."""
    model, spec, capacity, _ = fit(load_slo_file(DEMO_SLOS), None,
                                   capture_paths([str(SWEEP)]), None, 60.0)
    return model, spec, capacity
