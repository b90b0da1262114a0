"""What a normalizer keeps between scrapes (compiled series, their last values, the last
clean exposition: :mod:`fleetwatch.exporters.lastscrape`) never changes a result: after
any sequence of earlier bodies, a normalizer gives on a body exactly what a fresh
normalizer gives on it. Random mutations of the real captures of every source (values,
comments, new, removed, renamed, duplicated and swapped lines, churn, counter resets,
models invalidated), compared whole after every body; and the loop reads only the
changed lines of a body that keeps the last one's lines."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwatch.exporters.normalize import Normalized, Normalizer, value_of
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import TABLES, detect_kind
from tests.support import unit_mode
from tests.support.helpers import FIXTURES, fixture_files

#: (source kind, capture) of every real capture whose source has a table
CAPTURES = sorted((detect_kind(p.read_text()), str(p.relative_to(FIXTURES)))
                  for p in fixture_files())
CAPTURES = [(kind, name) for kind, name in CAPTURES if kind != "unknown"]
VALUES = st.one_of(st.integers(0, 10**6).map(str),
                   st.floats(0, 1e6, allow_nan=False).map(repr),
                   st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "-0.5", "1_0", "", "abc",
                                    "1e0", "1.0", "0x10", "1 1700000000000", "2\r", "3 "]))
MUTATIONS = ["value", "value", "value", "values", "comment", "drop", "duplicate", "swap",
             "revert", "rename", "new", "churn", "reset", "invalidate"]


def test_the_captures_cover_every_source():
    assert {kind for kind, _name in CAPTURES} == set(TABLES) - {"unknown"}


def _state(n: Normalized) -> str:
    """Everything a consumer reads of a normalized state, as one comparable text (repr:
    NaN compares as written): values as :func:`value_of` reads them (a series that once
    met another on one normalized series keeps the float of a sum where a fresh
    normalizer keeps the upstream text: the same number), ``numbers`` checked against
    them where made, ``keys`` for the state's own series (it may hold more: the
    compiled series not evicted yet), malformed lines by number (a known series with an
    empty value token is told "invalid sample value" and shown by its key, an unknown one
    "expected 'value [timestamp]'" and shown whole)."""
    values = [{p: value_of(v) for p, v in fam.items()} for fam in n.families]
    for fam, nums in zip(values, n.numbers or [None] * len(values), strict=True):
        assert nums is None or repr(nums) == repr(list(fam.values()))
    return repr((values, n.lines, sorted(n.models), sorted(n.unmapped),
                 sorted(n.invalid_samples.items()), n.invalid_examples,
                 [bad.lineno for bad in n.meta.invalid],
                 n.meta.types, n.meta.helps, n.meta.sample_lines, n.passthrough,
                 n.passthrough_types, n.refused, sorted(n.deferred),
                 [n.key(prefix) for fam in n.families for prefix in fam],
                 render([n])))


def _sample_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line and not line.startswith("#")]


def _renamed(line: str, tag: str) -> str:
    """The line with ``tag`` put before its first label value (another series: a renamed
    model or engine); unchanged when the line has no label value."""
    if '="' not in line:
        return line
    at = line.index('="') + 2
    return line[:at] + tag + line[at:]


@st.composite
def mutation(draw: st.DrawFn, kinds: list[str] = MUTATIONS) -> tuple[str, int, int, str]:
    return (draw(st.sampled_from(kinds)), draw(st.integers(0, 10**6)),
            draw(st.integers(0, 10**6)), draw(VALUES))


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
    elif kind in ("values", "reset"):  # a busy server; a restarted one (counters at 0)
        for k in samples[a % 7::7] if kind == "values" else samples:
            key, _, tok = out[k].rpartition(" ")
            try:
                out[k] = f"{key} {float(tok) + 1 + b % 5 if kind == 'values' else 0}"
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
    elif kind == "rename":  # one series renamed in place: as many lines as before
        out[i] = _renamed(out[i], f"r{b % 3}")
    elif kind == "new":  # a new series inserted
        out.insert(j, _renamed(out[i], f"n{b % 3}"))
    elif kind == "churn":  # every series renamed (new model names every scrape)
        out = [_renamed(line, f"c{b % 4}") if k in set(samples) else line
               for k, line in enumerate(out)]
    return out


def _check_sequence(kind: str, name: str, passthrough: bool,
                    steps: list[tuple[str, int, int, str]]) -> None:
    """Normalize the capture, then each mutation of it in turn, with one normalizer and
    with a fresh one per body: the same state every time."""
    first = (FIXTURES / name).read_text().split("\n")
    seasoned = Normalizer(TABLES[kind], passthrough=passthrough)
    lines = first
    for step in [("value", 0, 0, "same"), *steps]:  # the first: the capture again
        if step[0] == "invalidate":  # a model's runtime learned: its series recompiled
            models = sorted({m[0] for m in seasoned.normalize("\n".join(lines)).models})
            if models:
                seasoned.invalidate_models([models[step[1] % len(models)]])
        elif step[3] != "same":
            lines = _mutate(lines, first, step)
        text = "\n".join(lines)
        fresh = Normalizer(TABLES[kind], passthrough=passthrough)
        assert _state(seasoned.normalize(text)) == _state(fresh.normalize(text)), step


#: Mutations that keep the exposition's series and their order: values, comments,
#: resets, the capture again, models invalidated
SAME_SERIES = ["value", "values", "reset", "comment", "revert", "invalidate"]


@settings(max_examples=unit_mode.examples(150), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CAPTURES), st.booleans(),
       st.lists(mutation(SAME_SERIES), min_size=1, max_size=10))
def test_a_normalizer_that_saw_earlier_bodies_gives_what_a_fresh_one_gives(capture,
                                                                            passthrough,
                                                                            steps):
    _check_sequence(*capture, passthrough, steps)


def _series(n: Normalized) -> str:
    """The normalized series and their values (as floats; in prefix order: a sum comes
    after the family's other series), the models and the refusals by reason of a state,
    as one comparable text."""
    return repr(([sorted((p, value_of(v)) for p, v in fam.items()) for fam in n.families],
                 sorted(n.models), sorted(n.invalid_samples.items()), n.refused))


@settings(max_examples=unit_mode.examples(150), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CAPTURES), st.lists(mutation(), min_size=1, max_size=10))
def test_after_new_removed_renamed_and_moved_series_the_same_series_and_values(capture,
                                                                               steps):
    kind, name = capture
    first = (FIXTURES / name).read_text().split("\n")
    seasoned = Normalizer(TABLES[kind])
    lines = first
    for step in [("value", 0, 0, "same"), *steps]:
        if step[0] == "invalidate":
            models = sorted({m[0] for m in seasoned.normalize("\n".join(lines)).models})
            if models:
                seasoned.invalidate_models([models[step[1] % len(models)]])
        elif step[3] != "same":
            lines = _mutate(lines, first, step)
        text = "\n".join(lines)
        fresh = Normalizer(TABLES[kind])
        assert _series(seasoned.normalize(text)) == _series(fresh.normalize(text)), step


# Cases where what a series was compiled with depended on the bodies seen before: an
# unmapped sample's family and TYPE read where it first appeared, a sum compiled while
# another series fed it and kept once that series is gone.
def test_an_unmapped_line_moved_before_its_type_is_judged_by_the_types_before_it():
    _check_sequence("dcgm", "dcgm/dcgm-exporter-2026-vks-vgpu-GRID-A100-40C.prom", True,
                    [("swap", 0, 15, "0")])


def test_a_series_whose_partner_is_gone_is_written_as_it_alone():
    _check_sequence("dcgm", "dcgm/dcgm-exporter-2026-ericsson-T4-loaded-no-help-type.prom",
                    True, [("value", 0, 0, "0"), ("new", 0, 0, "0"), ("reset", 0, 0, "0"),
                           ("drop", 1646, 0, "0")])


def test_a_duplicated_line_turned_nan_is_read_as_a_fresh_normalizer_reads_it():
    first = (FIXTURES / TRITON_GPU_UUID).read_text().split("\n")
    seasoned, lines = Normalizer(TABLES["triton"]), first
    for step in [("value", 0, 0, "0"), ("value", 0, 0, "0"), ("duplicate", 0, 0, "0"),
                 ("churn", 0, 0, "0"), ("value", 0, 0, "NaN")]:
        lines = _mutate(lines, first, step)
        text = "\n".join(lines)
        fresh = Normalizer(TABLES["triton"])
        assert _series(seasoned.normalize(text)) == _series(fresh.normalize(text)), step


#: A Triton capture whose per-GPU series are summed over ``gpu_uuid``
TRITON_GPU_UUID = "triton/triton-2021-prometheus-docs-pr1953-gpu_uuid-two-versions-partial.prom"


#: Triton 2.51's per-model counters: with every duration counter there, no family is
#: mean-only (whose series are removed after the loop: not a clean exposition)
TRITON_COUNTERS = ("nv_inference_request_success", "nv_inference_count",
                   "nv_inference_exec_count", "nv_inference_request_duration_us",
                   "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
                   "nv_inference_compute_infer_duration_us",
                   "nv_inference_compute_output_duration_us")


def _triton(models: int, moved: int = 0, bump: int = 0, name: str = "m") -> str:
    """A Triton 2.51-shaped exposition: per model its counters (durations in µs, scaled
    to seconds) and a pending gauge; the first ``moved`` models' counters up by ``bump``;
    models named ``name`` + their number."""
    out = []
    for fam in TRITON_COUNTERS:
        out.append(f"# HELP {fam} x\n# TYPE {fam} counter")
        out += [f'{fam}{{model="{name}{i}",version="1"}} '
                f'{100 + i + (bump if i < moved else 0)}' for i in range(models)]
    out.append("# HELP nv_inference_pending_request_count x\n"
               "# TYPE nv_inference_pending_request_count gauge")
    out += [f'nv_inference_pending_request_count{{model="{name}{i}",version="1"}} {i % 3}'
            for i in range(models)]
    return "\n".join(out) + "\n"


@pytest.fixture
def lines_read(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Normalizer, int]]:
    """Per pass of a normalizer's loop, in order: the normalizer and how many lines the
    pass was given."""
    passes: list[tuple[Normalizer, int]] = []
    loop = Normalizer._read

    def spy(self: Normalizer, lines: list[str], indices, *rest):  # type: ignore[no-untyped-def]
        indices = list(indices)
        passes.append((self, len(indices)))
        return loop(self, lines, indices, *rest)

    monkeypatch.setattr(Normalizer, "_read", spy)
    return passes


def test_the_loop_reads_only_the_lines_that_changed(lines_read):
    n = Normalizer(TABLES["triton"])
    total = len(_triton(50).split("\n"))
    texts = [_triton(50), _triton(50), _triton(50, moved=3, bump=7), _triton(50, 3, 9),
             _triton(51, 3, 9), _triton(51, 3, 9), _triton(51, 3, 2), _triton(51, 3, 2, "x")]
    for text in texts:
        assert _state(n.normalize(text)) == _state(Normalizer(TABLES["triton"]).normalize(text))
    grown = len(_triton(51).split("\n"))
    seasoned = [count for who, count in lines_read if who is n]
    # cold; identical (no pass); 3 models × 8 counters moved; moved again; a new model
    # (every line); identical (no pass); 3 models' counters moved; every model renamed:
    # more than a third of the lines changed (every line)
    assert seasoned == [total, 24, 24, grown, 24, grown]
    assert all(count in (total, grown) for who, count in lines_read if who is not n)
    state = n.normalize(_triton(51, 3, 9))
    durations = {p: v for fam in state.families for p, v in fam.items()
                 if "request_duration_seconds_sum" in p}
    assert durations['modelserver_request_duration_seconds_sum{model="m0",model_version="1"'
                     ',backend="triton",runtime="unknown"}'] == (100 + 9) / 1e6


def test_a_refused_value_is_counted_and_then_forgotten():
    n = Normalizer(TABLES["triton"])
    n.normalize(_triton(5))
    n.normalize(_triton(5))
    bad = _triton(5).replace('nv_inference_request_success{model="m1",version="1"} 101',
                             'nv_inference_request_success{model="m1",version="1"} -4')
    assert n.normalize(bad).invalid_samples.total() == 1
    assert n.normalize(_triton(5)).invalid_samples.total() == 0
    assert _state(n.normalize(_triton(5))) == _state(Normalizer(TABLES["triton"]).normalize(
        _triton(5)))


def test_a_changed_bucket_is_checked_with_its_whole_histogram():
    name = "vllm/v0.32.0-cpu-real-engine-tiny-llm-under-load.prom"
    lines = (FIXTURES / name).read_text().split("\n")
    hist = "vllm:time_to_first_token_seconds"
    # one more request in the TTFT histogram: every bucket from its bound up, count, sum
    first = next(i for i, x in enumerate(lines) if x.startswith(hist + "_bucket{"))
    served = [f"{x.rpartition(' ')[0]} {float(x.rpartition(' ')[2]) + 1}"
              if i >= first + 3 and x.startswith((hist + "_bucket{", hist + "_count{"))
              else x for i, x in enumerate(lines)]
    # a bucket above its next one: the histogram is refused whole
    broken = list(served)
    broken[first + 2] = f"{broken[first + 2].rpartition(' ')[0]} 1e9"
    n = Normalizer(TABLES["vllm"])
    for text, refused in (("\n".join(lines), 0), ("\n".join(served), 0),
                          ("\n".join(broken), 1), ("\n".join(served), 0)):
        state = n.normalize(text)
        assert state.invalid_samples["buckets_decrease"] == refused
        assert _state(state) == _state(Normalizer(TABLES["vllm"]).normalize(text))
