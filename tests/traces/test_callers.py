"""A vLLM request named by its caller's span (``fleetwatch.traces.callers``, through the
joiner and the receiver): the caller's span first, last, missing, behind a span naming no
model; the wait, the bounds, and an adapter's SLO beside its base model's."""

from __future__ import annotations

from fleetwatch.otlp.config import TracesConfig
from fleetwatch.otlp.receiver import TraceReceiver
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from fleetwatch.traces.callers import Link, resolve
from fleetwatch.traces.join import TraceJoiner
from fleetwatch.traces.spans import Span
from tests.support.trace_helpers import T0, body

NS = 1_000_000_000
START = int(T0 * NS)


def vllm_span(trace: int, parent: str = "c1", **attrs: str) -> Span:
    """vLLM 0.32's ``llm_request`` span of trace ``trace`` whose parent span is
    ``parent`` (``""``: none), 0.5 s long."""
    return Span(f"{trace:032x}", "11" * 8, parent, "llm_request", 2, START,
                START + NS // 2, {"gen_ai.latency.e2e": 0.5,
                                  "gen_ai.latency.time_to_first_token": 0.1,
                                  "gen_ai.usage.completion_tokens": 5, **attrs}, ())


def caller_span(trace: int, span_id: str = "c1", parent: str = "",
                model: str | None = "a1", key: str = "gen_ai.request.model") -> Span:
    """A GenAI CLIENT span ``text_completion {model}`` (no model attribute for None)."""
    attrs: dict[str, str | int | float | bool] = {"gen_ai.operation.name": "text_completion"}
    if model is not None:
        attrs[key] = model
    return Span(f"{trace:032x}", span_id, parent, f"text_completion {model}", 3, START,
                START + NS, attrs, (), "client", "client")


def test_a_vllm_span_without_a_parent_is_emitted_at_once_under_vllm_model() -> None:
    j = TraceJoiner("tiny-llm")
    (f,) = j.add([vllm_span(1, parent="")], T0)
    assert f.model == "tiny-llm" and j.pending == 0
    assert (j.stats.caller_named, j.stats.caller_unnamed, j.stats.requests) == (0, 0, 1)


def test_the_caller_span_arriving_last_names_the_request() -> None:
    j = TraceJoiner("tiny-llm")
    assert j.add([vllm_span(1)], T0) == []
    assert j.pending == 1 and j.callers.waiting == 1 and j.stats.requests == 0
    (f,) = j.add([caller_span(1)], T0 + 1)
    assert (f.model, f.source, f.e2e_seconds) == ("a1", "vllm", 0.5)
    assert j.callers.waiting == 0
    assert (j.stats.caller_named, j.stats.caller_unnamed, j.stats.requests) == (1, 0, 1)


def test_the_caller_span_arriving_first_names_the_request_at_once() -> None:
    j = TraceJoiner("tiny-llm")
    assert j.add([caller_span(1, model="a2", key="gen_ai.response.model")], T0) == []
    assert j.stats.ignored == 0 and j.pending == 1
    (f,) = j.add([vllm_span(1)], T0 + 1)
    assert f.model == "a2" and j.stats.caller_named == 1


def test_both_in_one_body_either_order() -> None:
    for spans in ([vllm_span(1), caller_span(1)], [caller_span(1), vllm_span(1)]):
        j = TraceJoiner("tiny-llm")
        assert [f.model for f in j.add(spans, T0)] == ["a1"]


def test_response_model_takes_precedence_over_request_model() -> None:
    caller = caller_span(1, model="alias")
    caller.attributes["gen_ai.response.model"] = "a1"
    j = TraceJoiner("tiny-llm")
    assert [f.model for f in j.add([vllm_span(1), caller], T0)] == ["a1"]


def test_an_http_span_between_is_followed_to_the_genai_span() -> None:
    """vLLM's parent is the caller's HTTP client span (no model), whose parent is the
    GenAI span: the nearest ancestor naming a model names the request, whatever the
    arrival order; and the request waits while the chain is incomplete."""
    http = caller_span(1, span_id="h1", parent="g1", model=None)
    genai = caller_span(1, span_id="g1", model="a1")
    j = TraceJoiner("tiny-llm")
    assert j.add([vllm_span(1, parent="h1")], T0) == []
    assert j.add([http], T0) == []  # the chain stops at g1, not arrived
    assert [f.model for f in j.add([genai], T0)] == ["a1"]
    j = TraceJoiner("tiny-llm")
    assert j.add([genai], T0) == [] and j.add([http], T0) == []
    assert [f.model for f in j.add([vllm_span(1, parent="h1")], T0)] == ["a1"]


def test_a_chain_reaching_a_root_naming_no_model_is_emitted_at_once_unnamed() -> None:
    j = TraceJoiner("tiny-llm")
    assert j.add([vllm_span(1)], T0) == []
    (f,) = j.add([caller_span(1, model=None)], T0)
    assert f.model == "tiny-llm" and j.stats.caller_unnamed == 1 and j.callers.waiting == 0


def test_missing_caller_the_request_is_emitted_unnamed_after_the_wait() -> None:
    j = TraceJoiner("tiny-llm", caller_wait_s=6.0)
    assert j.add([vllm_span(1)], T0) == []
    assert j.expire(T0 + 5.9) == []
    (f,) = j.expire(T0 + 6.0)
    assert f.model == "tiny-llm" and j.pending == 0
    assert (j.stats.caller_named, j.stats.caller_unnamed, j.stats.requests) == (0, 1, 1)
    # the caller's span arriving after the wait names nothing more: it expires unused
    assert j.add([caller_span(1)], T0 + 7) == [] and j.expire(T0 + 20) == []
    assert j.stats.requests == 1


def test_flush_emits_the_waiting_requests_unnamed() -> None:
    j = TraceJoiner("tiny-llm", caller_wait_s=float("inf"))
    assert j.add([vllm_span(1), vllm_span(2)], T0) == []
    assert [f.model for f in j.flush()] == ["tiny-llm", "tiny-llm"] and j.pending == 0


def test_a_vllm_span_naming_its_model_does_not_wait() -> None:
    j = TraceJoiner("tiny-llm")
    (f,) = j.add([vllm_span(1, **{"gen_ai.request.model": "a2"})], T0)
    assert f.model == "a2" and j.pending == 0


def test_spans_naming_no_model_of_traces_without_a_waiting_request_are_ignored() -> None:
    j = TraceJoiner("tiny-llm")
    assert j.add([caller_span(1, model=None), caller_span(2, model="")], T0) == []
    assert j.stats.ignored == 2 and j.pending == 0


def test_bounds_evict_the_oldest_trace_emitting_its_request_unnamed() -> None:
    j = TraceJoiner("tiny-llm", max_traces=3, max_spans_per_trace=4, max_spans=100)
    out = [f for i in range(5) for f in j.add([vllm_span(i)], T0)]
    assert [f.trace_id for f in out] == [f"{0:032x}", f"{1:032x}"]  # the two oldest
    assert j.pending == 3 and j.stats.evicted == 2 and j.stats.caller_unnamed == 2
    assert j.stats.requests == 2
    # a trace full of spans: a further request is emitted as it is, never lost
    j = TraceJoiner("tiny-llm", max_spans_per_trace=2)
    junk = [caller_span(9, span_id=f"x{i}", parent="nowhere", model=None) for i in range(2)]
    assert j.add([vllm_span(9), *junk], T0) == []
    assert j.stats.span_overflow == 1  # the second junk span
    (f,) = j.add([vllm_span(9)], T0)
    assert f.model == "tiny-llm" and j.stats.span_overflow == 2
    # spans in all traces: the oldest traces go
    j = TraceJoiner("tiny-llm", max_spans=4)
    out = [f for i in range(6) for f in j.add([vllm_span(i)], T0)]
    assert len(out) == 2 and j.callers.waiting == 4


def test_a_span_sent_twice_is_held_once() -> None:
    j = TraceJoiner("tiny-llm", max_spans=3, caller_wait_s=1.0)
    for _ in range(3):
        assert j.add([caller_span(1)], T0) == []
    assert j.expire(T0 + 1) == [] and j.pending == 0
    # room for three waiting requests again: none evicted
    assert [f for i in (2, 3, 4) for f in j.add([vllm_span(i)], T0 + 1)] == []
    assert j.callers.waiting == 3 and j.stats.evicted == 0


def test_resolve_stops_on_a_cycle() -> None:
    links = {"a": Link("b", ""), "b": Link("a", "")}
    assert resolve(links, "a") == ""
    assert resolve(links, "z") is None
    assert resolve({"a": Link("", "m")}, "a") == "m"


SLOS = parse_slo_file({"slos": [
    {"name": name, "selector": {"models": [model]},
     "sli": {"source": "traces", "latency": {"metric": "ttft", "threshold_seconds": 0.2}},
     "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1d"}],
     "concurrency": {"envelope": 8}}
    for name, model in (("adapter-ttft", "a1"), ("base-ttft", "tiny-llm"))]})


def test_an_adapters_slo_counts_its_requests_and_the_base_models_the_others() -> None:
    """Through the receiver: requests with a caller naming ``a1`` go to the adapter's SLO,
    those naming ``tiny-llm``, without a caller, or whose caller never came, to the base
    model's; a too-long name from a caller is refused with its span (admission)."""
    engine = SLOEngine(SLOS)
    rec = TraceReceiver(TracesConfig(settle_seconds=0, vllm_model="tiny-llm",
                                     caller_wait_seconds=5), engine,
                        max_label_value_length=100)
    now = T0 + 1
    spans = [vllm_span(1), vllm_span(2), vllm_span(3), vllm_span(4, parent=""),
             vllm_span(5), vllm_span(6)]
    rec.ingest(body_of(spans), "application/x-protobuf", now=now)
    callers = [caller_span(1, model="a1"), caller_span(2, model="a1"),
               caller_span(3, model="tiny-llm"), caller_span(6, model="x" * 101)]
    rec.ingest(body_of(callers), "application/x-protobuf", now=now)
    rec.tick(now + 5)  # trace 5's caller never came, trace 6's was refused
    rec.flush(now + 5)
    events = {name: st.events["all"] for (name, _), st in engine.states.items()}
    assert events == {"adapter-ttft": 2, "base-ttft": 4}
    assert rec.refused_spans["label_too_long"] == 1
    st = rec.joiner.stats
    assert (st.caller_named, st.caller_unnamed, st.requests) == (3, 2, 6)


def body_of(spans: list[Span]) -> bytes:
    """An OTLP protobuf body of ``spans`` (through opentelemetry-proto)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

    out = []
    for s in spans:
        pb = PbSpan(trace_id=bytes.fromhex(s.trace_id), span_id=_id(s.span_id),
                    parent_span_id=_id(s.parent_span_id) if s.parent_span_id else b"",
                    name=s.name, kind=s.kind, start_time_unix_nano=s.start_ns,
                    end_time_unix_nano=s.end_ns)
        for k, v in s.attributes.items():
            a = pb.attributes.add(key=k).value
            if isinstance(v, str):
                a.string_value = v
            elif isinstance(v, int):
                a.int_value = v
            else:
                a.double_value = v
        out.append(pb)
    return body(out)


def _id(text: str) -> bytes:
    """An 8-byte span id from a short test name."""
    return text.encode().ljust(8, b"\0")[:8]


def test_fleetwatch_traces_names_vllm_requests_by_callers_in_any_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Offline (``fleetwatch traces``), the files are one export: a caller's span in a
    later file names the request, and nothing expires between files."""
    from fleetwatch.commands.traces import read_facts

    files = []
    for i, spans in enumerate(([vllm_span(1), vllm_span(2)], [], [], [caller_span(1)])):
        files.append(tmp_path / f"{i}.pb")
        files[-1].write_bytes(body_of(spans))
    facts, joiner = read_facts([str(f) for f in files], "tiny-llm")
    assert sorted(f.model for f in facts) == ["a1", "tiny-llm"]
    assert (joiner.stats.caller_named, joiner.stats.caller_unnamed) == (1, 1)
