"""The gateway source: the production-stack router and the llm-d endpoint picker are
detected as gateways (never as vLLM) and feed only ``modelserver_gateway_*`` families."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import SOURCES_BY_KIND, detect_kind

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "expositions"
GATEWAY_FIXTURES = sorted((FIXTURES / "gateway").glob("*.prom"))


def _normalize(text: str) -> str:
    return render([Normalizer(SOURCES_BY_KIND["gateway"].table).normalize(text)])


def _families(rendered: str) -> set[str]:
    return {line.split()[2] for line in rendered.splitlines() if line.startswith("# TYPE ")}


def test_there_are_gateway_fixtures():
    assert len(GATEWAY_FIXTURES) >= 3


@pytest.mark.parametrize("path", GATEWAY_FIXTURES, ids=lambda p: p.name)
def test_gateway_expositions_are_detected_as_gateways(path):
    assert detect_kind(path.read_text(encoding="utf-8")) == "gateway"


@pytest.mark.parametrize("path", GATEWAY_FIXTURES, ids=lambda p: p.name)
def test_gateway_series_feed_only_gateway_families(path):
    families = _families(_normalize(path.read_text(encoding="utf-8")))
    assert families - {"modelserver_model_info"}, "a gateway fixture maps to nothing"
    engine = {f for f in families
              if f != "modelserver_model_info" and not f.startswith("modelserver_gateway_")}
    assert not engine, f"gateway series read as engine series: {engine}"


@pytest.mark.parametrize("path", sorted((FIXTURES / "vllm").glob("*.prom")),
                         ids=lambda p: p.name)
def test_engine_expositions_are_not_gateways(path):
    """Every captured vLLM engine stays vLLM (the router's names are not the engine's)."""
    assert detect_kind(path.read_text(encoding="utf-8")) == "vllm"


def test_an_engine_name_with_the_routers_server_label_is_a_gateway():
    """The router republishes ``vllm:num_requests_running`` per ``server``: auto detection
    reads it as a gateway, and it never becomes the engine's requests_active."""
    text = ("# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{server="http://192.0.2.1:8000"} 4\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{server="http://192.0.2.1:8000"} 1\n')
    assert detect_kind(text) == "gateway"
    assert _normalize(text) == (
        "# HELP modelserver_gateway_endpoint_requests [ALPHA] Requests on one engine endpoint "
        "as the gateway last saw them (running or waiting): the router's and the EPP's own "
        "copy of the engine's gauges, sampled on their schedule. Never add it to "
        "modelserver_requests_active.\n"
        "# TYPE modelserver_gateway_endpoint_requests gauge\n"
        'modelserver_gateway_endpoint_requests{backend="gateway",endpoint="http://192.0.2.1:8000",'
        'state="running"} 4\n'
        'modelserver_gateway_endpoint_requests{backend="gateway",endpoint="http://192.0.2.1:8000",'
        'state="waiting"} 1\n')


def test_the_engines_own_gauge_stays_vllm():
    text = ("# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{engine="0",model_name="m"} 4\n')
    assert detect_kind(text) == "vllm"


def test_epp_new_name_wins_over_its_former_name():
    """An EPP in the middle of the rename exports both names: one series, the new one's."""
    text = ("# TYPE llm_d_epp_average_queue_size gauge\n"
            'llm_d_epp_average_queue_size{name="p"} 3\n'
            "# TYPE inference_pool_average_queue_size gauge\n"
            'inference_pool_average_queue_size{name="p"} 9\n')
    samples = [line for line in _normalize(text).splitlines() if not line.startswith("#")]
    assert len(samples) == 1
    series, value = samples[0].rsplit(" ", 1)
    assert series == 'modelserver_gateway_pool_mean_requests{backend="gateway",pool="p",' \
        'state="waiting"}'
    assert float(value) == 3


def test_epp_former_names_alone_still_map():
    text = ("# TYPE inference_pool_per_pod_queue_size gauge\n"
            'inference_pool_per_pod_queue_size{model_server_pod="e0",name="p"} 2\n'
            "# TYPE inference_pool_ready_pods gauge\n"
            'inference_pool_ready_pods{name="p"} 1\n')
    out = _normalize(text)
    assert ('modelserver_gateway_endpoint_requests{backend="gateway",pool="p",endpoint="e0",'
            'state="waiting"} 2\n') in out
    assert 'modelserver_gateway_pool_ready_endpoints{backend="gateway",pool="p"} 1\n' in out


def test_predicted_latency_is_not_observed_latency():
    """A forecast goes to the predicted family; the observed TTFT to the gateway's TTFT;
    neither to the engine's modelserver_time_to_first_token_seconds."""
    labels = 'model_name="m",target_model_name="m-v2"'
    text = ("# TYPE llm_d_epp_request_predicted_ttft_seconds histogram\n"
            f'llm_d_epp_request_predicted_ttft_seconds_bucket{{{labels},le="+Inf"}} 2\n'
            f"llm_d_epp_request_predicted_ttft_seconds_sum{{{labels}}} 0.5\n"
            f"llm_d_epp_request_predicted_ttft_seconds_count{{{labels}}} 2\n"
            "# TYPE llm_d_epp_request_ttft_seconds histogram\n"
            f'llm_d_epp_request_ttft_seconds_bucket{{{labels},le="+Inf"}} 2\n'
            f"llm_d_epp_request_ttft_seconds_sum{{{labels}}} 0.75\n"
            f"llm_d_epp_request_ttft_seconds_count{{{labels}}} 2\n")
    out = _normalize(text)
    assert ('modelserver_gateway_predicted_time_to_first_token_seconds_sum{model="m",'
            'backend="gateway",runtime="gateway"} 0.5\n') in out
    assert ('modelserver_gateway_time_to_first_token_seconds_sum{model="m",'
            'backend="gateway",runtime="gateway"} 0.75\n') in out
    assert "modelserver_time_to_first_token_seconds" not in out


def test_every_gateway_family_is_mapped_or_listed():
    """Each family of the gateway fixtures is mapped or listed unmapped with a reason."""
    source = SOURCES_BY_KIND["gateway"]
    mapped = {r.source for r in source.table.rules}
    listed = [name for name, _why in source.not_mapped]

    def known(family: str) -> bool:
        base = family.removesuffix("_total")
        return (family in mapped or base in mapped or family in listed
                or any(n.endswith("*") and family.startswith(n[:-1]) for n in listed))

    unknown = set()
    for path in GATEWAY_FIXTURES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# TYPE "):
                family = line.split()[2]
                if family.endswith("_created") or family.startswith("inference_extension_"):
                    continue
                if not known(family):
                    unknown.add(family)
    assert not unknown


def test_a_sidecar_target_may_be_a_gateway():
    """``kind: gateway`` is a registered kind: a sidecar configuration accepts it."""
    from fleetwatch.sidecar.config import SidecarConfig

    cfg = SidecarConfig.model_validate({"targets": [
        {"name": "router", "kind": "gateway", "url": "http://127.0.0.1:8001/metrics"}]})
    assert cfg.targets[0].kind == "gateway"
