"""The replica model fitted from the real-vLLM sweep (tests/data/vllm-sweep)."""

from __future__ import annotations

import pytest

from fleetwatch.autoscale.replica import FitError, LatencyCurve, ReplicaModel, curve_from_bands
from fleetwatch.slo.spec import SLOSpec


def test_fit_reads_the_sweeps_engine(sweep_fit: tuple[ReplicaModel, SLOSpec, float]) -> None:
    model, spec, capacity = sweep_fit
    assert model.slots == 8  # the sweep's --max-num-seqs
    assert model.kv_capacity_tokens == 3072  # 24 blocks of 128 tokens
    # the sweep's prompts: 33,085 input tokens over 914 requests
    assert model.ref_input_tokens == pytest.approx(33085 / 914)
    assert spec.name == "llm-ttft" and capacity == 8.0
    # median TTFT grows with the requests running, and stays below the SLO's 100 ms
    ys = [model.ttft.at(n) for n in (1, 2, 4, 8)]
    assert ys == sorted(ys) and 0.005 < ys[0] < ys[-1] < 0.1
    assert 0.001 < model.itl.at(1) <= model.itl.at(8) < 0.05
    # prefill grows with the prompt beyond the captures' mean
    assert model.prefill_seconds(1, 400) > model.prefill_seconds(1, 10) == model.ttft.at(1)


def test_curve_leaves_out_bands_above_the_batch_limit() -> None:
    bands = {"1": {"concurrency": 1.0, "latency_seconds": 0.02},
             "8": {"concurrency": 7.5, "latency_seconds": 0.01},
             "16": {"concurrency": 15.0, "latency_seconds": 0.3}}
    c = curve_from_bands(bands, 8.0, "TTFT")
    assert c.points == ((1.0, 0.015), (7.5, 0.015))  # isotonic, band 16 left out
    assert LatencyCurve(((1.0, 1.0), (3.0, 3.0))).at(2.0) == 2.0
    with pytest.raises(FitError, match="no ITL band"):
        curve_from_bands({"16": {"concurrency": 15.0, "latency_seconds": 0.3}}, 8.0, "ITL")


def test_fit_names_what_is_missing() -> None:
    with pytest.raises(FitError, match="no SLO fit-ttft"):
        ReplicaModel.from_slo_document({"slos": []}, "fit-ttft", "fit-itl", "m",
                                       ref_input_tokens=10, kv_capacity_tokens=100)
    rows = [{"slo": n, "model": "m", "batch_limit": None, "band_latency": {}}
            for n in ("fit-ttft", "fit-itl")]
    with pytest.raises(FitError, match="no batch limit"):
        ReplicaModel.from_slo_document({"slos": rows}, "fit-ttft", "fit-itl", "m",
                                       ref_input_tokens=10, kv_capacity_tokens=100)
