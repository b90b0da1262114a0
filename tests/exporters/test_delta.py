"""The normalizer's delta path (``fleetwatch.exporters.delta``) gives what the full loop
gives: random sequences of mutated real captures, normalized by two normalizers, one with
the delta path and one without, compared whole after every exposition (families with
their value types and order, lines, numbers, models, refusals, malformed lines, the
rendered text); and the delta path is taken where it should be and only there."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwatch.exporters.normalize import Normalized, Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import TABLES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "expositions"
#: (source kind, capture): real captures of every source with a table (SOURCES.md)
CAPTURES = [
    ("triton", "triton/triton-2.51.0-pytriton-wheel-cpu-standalone-summaries-custom-histogram.prom"),
    ("triton", "triton/triton-2.24.0-22.07-P100-three-models-after-inference.prom"),
    ("triton", "triton/triton-2021-prometheus-docs-pr1953-gpu_uuid-two-versions-partial.prom"),
    ("vllm", "vllm/v0.32.0-cpu-real-engine-tiny-llm-under-load.prom"),
    ("vllm", "vllm/v0.8.2-statlogger-cpu-generated.prom"),
    ("sglang", "sglang/sglang-v0.5.10.post1-datadog-opt125m-trimmed.prom"),
    ("dcgm", "dcgm/dcgm-exporter-2026-vks-vgpu-GRID-A100-40C.prom"),
]
VALUES = st.one_of(st.integers(0, 10**6).map(str),
                   st.floats(0, 1e6, allow_nan=False).map(repr),
                   st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "-0.5", "1_0", "", "abc",
                                    "1e0", "1.0", "0x10", "1 1700000000000", "2\r", "3 "]))


def _state(n: Normalized) -> str:
    """Everything a consumer reads of a normalized state, as one comparable text (repr:
    NaN and value types compare as written)."""
    return repr((n.families, n.lines, n.numbers, sorted(n.models), sorted(n.unmapped),
                 sorted(n.invalid_samples.items()), n.invalid_examples,
                 [(bad.lineno, bad.reason, bad.line) for bad in n.meta.invalid],
                 n.meta.types, n.meta.helps, n.meta.sample_lines, n.passthrough,
                 n.passthrough_types, n.refused, sorted(n.deferred), render([n])))


def _sample_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line and not line.startswith("#")]


@st.composite
def mutation(draw: st.DrawFn) -> tuple[str, int, int, str]:
    kind = draw(st.sampled_from(["value", "value", "value", "values", "comment", "drop",
                                 "duplicate", "swap", "revert", "invalidate"]))
    return kind, draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6)), draw(VALUES)


def _mutate(lines: list[str], first: list[str], step: tuple[str, int, int, str]) -> list[str]:
    kind, a, b, value = step
    samples = _sample_lines(lines)
    out = list(lines)
    if kind == "revert":
        return list(first)
    if not samples:
        return out
    i, j = samples[a % len(samples)], samples[b % len(samples)]
    if kind == "value":
        out[i] = out[i][:out[i].rfind(" ")] + " " + value
    elif kind == "values":  # a busy server: every seventh sample moves
        for k in samples[a % 7::7]:
            key, _, tok = out[k].rpartition(" ")
            try:
                out[k] = f"{key} {float(tok) + 1 + b % 5}"
            except ValueError:
                out[k] = f"{key} 1"
    elif kind == "comment":
        comments = [k for k, line in enumerate(lines) if line.startswith("# HELP")]
        if comments:
            out[comments[a % len(comments)]] += " (changed)"
    elif kind == "drop":
        del out[i]
    elif kind == "duplicate":
        out.insert(j, out[i])
    elif kind == "swap":
        out[i], out[j] = out[j], out[i]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CAPTURES), st.booleans(),
       st.lists(mutation(), min_size=1, max_size=10))
def test_the_delta_path_gives_what_the_full_loop_gives(capture, passthrough, steps):
    kind, name = capture
    first = (FIXTURES / name).read_text().split("\n")
    with_delta = Normalizer(TABLES[kind], passthrough=passthrough)
    full = Normalizer(TABLES[kind], passthrough=passthrough, delta=False)
    lines = first
    for step in [("value", 0, 0, "same"), *steps]:  # the first: the capture again
        if step[0] == "invalidate":  # a model's runtime learned: its series recompiled
            models = sorted({m[0] for m in full.normalize("\n".join(lines)).models})
            if models:
                gone = models[step[1] % len(models)]
                assert with_delta.invalidate_models([gone]) == full.invalidate_models([gone])
        elif step[3] != "same":
            lines = _mutate(lines, first, step)
        text = "\n".join(lines)
        assert _state(with_delta.normalize(text)) == _state(full.normalize(text)), step
    assert full.delta_reads == 0


#: Triton 2.51's per-model counters: with every duration counter there, no family is
#: mean-only (whose series are removed after the loop: not a clean exposition)
TRITON_COUNTERS = ("nv_inference_request_success", "nv_inference_count",
                   "nv_inference_exec_count", "nv_inference_request_duration_us",
                   "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
                   "nv_inference_compute_infer_duration_us",
                   "nv_inference_compute_output_duration_us")


def _triton(models: int, moved: int = 0, bump: int = 0) -> str:
    """A Triton 2.51-shaped exposition: per model its counters (durations in µs, scaled
    to seconds) and a pending gauge; the first ``moved`` models' counters up by ``bump``."""
    out = []
    for fam in TRITON_COUNTERS:
        out.append(f"# HELP {fam} x\n# TYPE {fam} counter")
        out += [f'{fam}{{model="m{i}",version="1"}} {100 + i + (bump if i < moved else 0)}'
                for i in range(models)]
    out.append("# HELP nv_inference_pending_request_count x\n"
               "# TYPE nv_inference_pending_request_count gauge")
    out += [f'nv_inference_pending_request_count{{model="m{i}",version="1"}} {i % 3}'
            for i in range(models)]
    return "\n".join(out) + "\n"


def test_a_busy_server_takes_the_delta_path_and_a_new_series_does_not():
    n = Normalizer(TABLES["triton"])
    full = Normalizer(TABLES["triton"], delta=False)
    texts = [_triton(50), _triton(50), _triton(50, moved=3, bump=7), _triton(50, 3, 9),
             _triton(51, 3, 9), _triton(51, 3, 9), _triton(51, 3, 2)]
    reads = []
    for text in texts:
        assert _state(n.normalize(text)) == _state(full.normalize(text))
        reads.append(n.delta_reads)
    # cold; identical; 24 lines moved; moved again; a new model; identical; moved
    assert reads == [0, 1, 2, 3, 3, 4, 5]
    # the seconds really moved: 3 models' duration counters, scaled from µs
    state = n.normalize(_triton(51, 3, 9))
    durations = {p: v for fam in state.families for p, v in fam.items()
                 if "request_duration_seconds_sum" in p}
    assert durations['modelserver_request_duration_seconds_sum{model="m0",model_version="1"'
                     ',backend="triton",runtime="unknown"}'] == (100 + 9) / 1e6


def test_a_refused_value_or_histogram_goes_to_the_full_loop_a_served_request_does_not():
    n = Normalizer(TABLES["triton"])
    n.normalize(_triton(5))
    n.normalize(_triton(5))
    assert n.delta_reads == 1
    bad = _triton(5).replace('nv_inference_request_success{model="m1",version="1"} 101',
                             'nv_inference_request_success{model="m1",version="1"} -4')
    state = n.normalize(bad)
    assert n.delta_reads == 1 and state.invalid_samples.total() == 1
    n.normalize(_triton(5))  # after a refusal: the full loop once, then the delta path
    n.normalize(_triton(5))
    assert n.delta_reads == 2
    vllm = Normalizer(TABLES["vllm"])
    full = Normalizer(TABLES["vllm"], delta=False)
    lines = (FIXTURES / CAPTURES[3][1]).read_text().split("\n")
    hist = "vllm:time_to_first_token_seconds"
    # one more request in the TTFT histogram: every bucket from its bound up, count, sum
    first = next(i for i, x in enumerate(lines) if x.startswith(hist + "_bucket{"))
    served = [f"{x.rpartition(' ')[0]} {float(x.rpartition(' ')[2]) + 1}"
              if i >= first + 3 and x.startswith((hist + "_bucket{", hist + "_count{"))
              else x for i, x in enumerate(lines)]
    # a bucket above its next one: the histogram is refused whole, by the full loop
    broken = list(served)
    broken[first + 2] = f"{broken[first + 2].rpartition(' ')[0]} 1e9"
    reads = []
    for text in ("\n".join(lines), "\n".join(lines), "\n".join(served),
                 "\n".join(broken), "\n".join(served), "\n".join(served)):
        state = vllm.normalize(text)
        assert _state(state) == _state(full.normalize(text))
        reads.append(vllm.delta_reads)
    assert reads == [0, 1, 2, 2, 2, 3]
    assert state.invalid_samples.total() == 0
    assert full.normalize("\n".join(broken)).invalid_samples["buckets_decrease"] == 1


def test_every_sources_capture_takes_the_delta_path_when_counters_move():
    """Per real capture, move every counter three times (not a bucket: see above; not
    vLLM's admission rejections, summed over reasons into one series: a changed part of
    a sum is read by the full loop): each exposition after the first is read by the
    delta path, with the full loop's result (but for the capture whose two GPU instances
    sum into one series: the full loop reads it every time)."""
    for kind, name in CAPTURES:
        lines = (FIXTURES / name).read_text().split("\n")
        n = Normalizer(TABLES[kind])
        full = Normalizer(TABLES[kind], delta=False)
        for step in range(4):
            moved = [f"{line.rpartition(' ')[0]} {float(line.rpartition(' ')[2]) + step}"
                     if line and line[0] != "#" and "_bucket{" not in line
                     and "admission_rejections" not in line
                     and line.split("{")[0].endswith(("_total", "_count", "_sum"))
                     else line for line in lines]
            text = "\n".join(moved)
            assert _state(n.normalize(text)) == _state(full.normalize(text)), (name, step)
        expected = 0 if "gpu_uuid-two-versions" in name else 3
        assert n.delta_reads == expected, name
