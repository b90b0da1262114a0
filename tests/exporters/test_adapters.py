"""LoRA adapters from ``vllm:lora_requests_info`` (``fleetwatch.exporters.adapters`` and the
normalizer's adapter step): the latest series is the state, older ones linger.

The expected states are read from the captures with prometheus_client's parser (the series
with the greatest value), not from fleetwatch's."""

from __future__ import annotations

from fleetwatch.exporters.adapters import AdapterPresence, adapter_presence
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.sources import SOURCES_BY_KIND
from tests.support.helpers import FIXTURES, normalized_samples, upstream_samples

UNDER_LOAD = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-lora-specdecode-under-load.prom"
AFTER_LOAD = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-lora-specdecode-after-load.prom"
FAMILY = "modelserver_adapter_requests_present"


def _latest_lists(text: str) -> tuple[set[str], set[str], set[str]]:
    """(running, waiting, every adapter named) by prometheus_client's reading."""
    info = [(v, lab) for n, lab, v in upstream_samples(text) if n == "vllm:lora_requests_info"]
    assert len(info) > 1, "the capture must hold lingering series to test the choice"
    _, latest = max(info, key=lambda x: x[0])
    named = set().union(*(_split(lab["running_lora_adapters"])
                          | _split(lab["waiting_lora_adapters"]) for _, lab in info))
    return (_split(latest["running_lora_adapters"]), _split(latest["waiting_lora_adapters"]),
            named)


def _split(value: str) -> set[str]:
    return {a for a in value.split(",") if a}


def _exported(text: str) -> dict[tuple[str, str], float]:
    return {(lab["adapter"], lab["state"]): v for n, lab, v in normalized_samples(text)
            if n == FAMILY and lab["model"] == "tiny-llm" and lab["dp_rank"] == "0"}


def test_under_load_the_latest_series_is_the_state():
    text = UNDER_LOAD.read_text(encoding="utf-8")
    running, waiting, named = _latest_lists(text)
    assert running, "the capture was taken with adapters running"
    want = {(a, s): float(a in (running if s == "running" else waiting))
            for a in named for s in ("running", "waiting")}
    assert _exported(text) == want


def test_after_load_lingering_series_are_not_current():
    text = AFTER_LOAD.read_text(encoding="utf-8")
    running, waiting, named = _latest_lists(text)
    assert not running and not waiting and named == {"a1", "a2"}
    assert _exported(text) == {(a, s): 0.0 for a in named for s in ("running", "waiting")}


def test_lora_requests_info_is_no_longer_unmapped():
    n = Normalizer(SOURCES_BY_KIND["vllm"].table).normalize(UNDER_LOAD.read_text(encoding="utf-8"))
    assert "vllm:lora_requests_info" not in n.unmapped
    prefix = next(p for f in n.families for p in f if p.startswith(FAMILY + "{"))
    assert n.key(prefix)[0] == FAMILY


def test_the_state_follows_the_exposition_from_scrape_to_scrape():
    """One normalizer, under load then after: the adapters go from running to idle (the
    cached state of the first exposition must not leak into the second), and back."""
    under = UNDER_LOAD.read_text(encoding="utf-8")
    after = AFTER_LOAD.read_text(encoding="utf-8")
    norm = Normalizer(SOURCES_BY_KIND["vllm"].table)
    states = []
    for text in (under, after, after, under):
        n = norm.normalize(text)
        fam = next(f for f in n.families if any(p.startswith(FAMILY + "{") for p in f))
        states.append(sum(float(v) for v in fam.values()))
    assert states[0] > 0 and states[1] == states[2] == 0 and states[3] == states[0]


def test_malformed_and_hostile_lines_are_skipped_not_fatal():
    text = "\n".join([
        "# TYPE vllm:lora_requests_info gauge",
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="x",waiting_lora_adapters=""} NaN',
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",waiting_lora_adapters="b"} 10',
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="c",waiting_lora_adapters="" 20',
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 5',
        "vllm:lora_requests_info",
        "",
    ])
    assert adapter_presence(text) == [AdapterPresence("a", True, False),
                                      AdapterPresence("b", True, True)]
    assert adapter_presence("vllm:num_requests_running 1\n") == []


def test_each_adapter_is_an_observed_model_its_registry_entry_owns():
    """vLLM serves an adapter under its own name: the registry owns it by that name, and
    its modelserver_model_info carries the adapter's owner, not the base model's."""
    from fleetwatch.labels.registry import parse_registry

    n = Normalizer(SOURCES_BY_KIND["vllm"].table).normalize(AFTER_LOAD.read_text(encoding="utf-8"))
    assert {m[0] for m in n.models} == {"tiny-llm", "a1", "a2"}
    registry = parse_registry({"models": [
        {"name": "a1", "team": "support", "owner": "erin@example.com", "oncall": "support-oncall"},
        {"name": "tiny-llm", "team": "genai", "owner": "bob@example.com", "oncall": "genai-oncall"},
    ]})
    lines = registry.info_lines(n.models)
    (a1,) = [line for line in lines if 'model="a1"' in line]
    assert 'oncall="support-oncall"' in a1 and 'team="support"' in a1
