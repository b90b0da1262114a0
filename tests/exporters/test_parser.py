"""The fast parser agrees with prometheus_client's parser and survives hostile input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.exporters.labelblocks import read_block
from fleetwatch.exporters.parser import (
    ExpositionError,
    Metadata,
    format_value,
    iter_samples,
    parse_exposition,
    parse_label_block,
    render_labels,
    split_key,
)
from tests.support import unit_mode
from tests.support.helpers import fixture_files


def _reference(text: str) -> list[tuple[str, tuple, float]]:
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append((s.name, tuple(sorted(s.labels.items())), s.value))
    return out


def _ours(text: str) -> list[tuple[str, tuple, float]]:
    samples, _ = parse_exposition(text)
    return [(n, tuple(sorted(labels)), v) for n, labels, v in samples]


def _canon(samples, types):
    """prometheus_client renames counter samples without _total (even a sample of another
    family that strays into a counter family); compare names without that suffix."""
    out = []
    for name, labels, value in samples:
        if name.endswith("_total"):
            name = name[:-6]
        out.append((name, labels, "nan" if math.isnan(value) else float(value)))
    return sorted(out, key=repr)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_agrees_with_prometheus_client_on_every_fixture(path):
    text = path.read_text(encoding="utf-8")
    try:
        reference = _reference(text)
    except (ValueError, TypeError, IndexError) as exc:
        # prometheus_client rejects the whole body; we must still read every good line.
        ours, meta = parse_exposition(text)
        assert ours or meta.invalid, f"reference rejected it ({exc}); we found nothing"
        pytest.skip(f"prometheus_client rejects this fixture: {exc}")
    ours, meta = parse_exposition(text)
    types = dict(meta.types)
    ref_types = {}
    for fam in text_string_to_metric_families(text):
        ref_types[fam.name] = fam.type
    theirs = _canon(reference, {**types, **ref_types})
    mine = _canon([(n, tuple(sorted(lab)), v) for n, lab, v in ours], {**types, **ref_types})
    # prometheus_client drops OpenMetrics-style _created samples of counters in some
    # versions; compare everything else exactly.
    assert [s for s in mine if not s[0].endswith("_created")] == \
        [s for s in theirs if not s[0].endswith("_created")]


def test_escapes_and_odd_spacing():
    name, labels = split_key('m{a="x\\"y",b="back\\\\slash", c="new\\nline",d="}{",}')
    assert name == "m"
    assert labels == (("a", 'x"y'), ("b", "back\\slash"), ("c", "new\nline"), ("d", "}{"))


@pytest.mark.parametrize("bad", [
    'm{a="unterminated}',
    'm{a=unquoted}',
    'm{a="1",a="2"}',
    'm{1a="x"}',
    'm{a="bad\\escape"}',
    'm{__name__="x"}',
    '1m{a="x"}',
])
def test_invalid_label_sets_raise(bad):
    with pytest.raises(ExpositionError):
        split_key(bad)


def test_malformed_lines_are_reported_not_raised():
    text = "\n".join([
        "# TYPE good counter",
        "good 1",
        "novalue",
        'broken{a="1" 2',
        "toomany 1 2 3",
        "good_total 2 1700000000000",
        'with_exemplar_total{a="1"} 3 # {trace_id="abc"} 1.0',
        "",
    ])
    meta = Metadata()
    keys = [(k, v) for k, v, _ in iter_samples(text, meta)]
    assert keys == [("good", "1"), ("good_total", "2"), ('with_exemplar_total{a="1"}', "3")]
    assert [b.lineno for b in meta.invalid] == [3, 4, 5]


label_values = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not n.startswith("__"))


@settings(max_examples=unit_mode.examples(300), deadline=None)
@given(st.dictionaries(label_names, label_values, max_size=5),
       st.floats(allow_nan=False) | st.sampled_from([math.inf, -math.inf]))
def test_render_then_parse_round_trips_and_matches_reference(labels, value):
    pairs = tuple(labels.items())
    line = f"metric{render_labels(pairs)} {format_value(value)}"
    samples, meta = parse_exposition(line + "\n")
    assert not meta.invalid
    assert samples == [("metric", pairs, value)]
    ref = _reference(line + "\n")
    assert ref == [("metric", tuple(sorted(labels.items())), value)]


_LINES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(['m{a="b"} 1', 'm{a="x\\"y",b="\\n"} -2.5e3', "m_total 7 1700000000",
                     "# TYPE m counter", "# HELP m some help", 'h_bucket{le="+Inf"} NaN',
                     'g{ a = "1" , } +Inf', "m 1 # {trace=\"t\"} 2", "# EOF", "\ufeffm 1"]))


@settings(max_examples=unit_mode.examples(300), deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_LINES, max_size=12).map("\n".join)))
def test_never_raises_on_arbitrary_text(text):
    """Whatever the text: every line is accounted for (a sample, a comment, or skipped and
    counted in ``meta.invalid``), and every sample read round-trips through the renderer."""
    samples, meta = parse_exposition(text)
    # accounting: each non-blank, non-comment line (before "# EOF") is a sample or skipped
    body = text[1:] if text.startswith("\ufeff") else text
    data_lines = []
    for lineno, line in enumerate(body.split("\n"), 1):
        if line.startswith("#") and line.rstrip() == "# EOF":
            break
        if line and not line.startswith("#"):
            data_lines.append(lineno)
    invalid = {bad.lineno for bad in meta.invalid}
    assert len(samples) + len(invalid & set(data_lines)) == len(data_lines)
    assert len(samples) <= meta.sample_lines <= len(data_lines)
    # round trip: a sample read is a sample written
    for name, labels, value in samples:
        again, again_meta = parse_exposition(f"{name}{render_labels(labels)} "
                                             f"{format_value(value)}\n")
        assert not again_meta.invalid, (name, labels, value)
        [(name2, labels2, value2)] = again
        assert (name2, labels2) == (name, labels)
        assert value2 == value or (math.isnan(value) and math.isnan(value2))


def test_label_block_allows_trailing_comma_and_spaces():
    assert parse_label_block('{ a = "1" , b="2", }') == (("a", "1"), ("b", "2"))


@pytest.mark.parametrize(("block", "pairs"), [
    ("{}", ()),
    ('{a="b",}', (("a", "b"),)),
    ('{a="",b="x=y,c=\'d\'"}', (("a", ""), ("b", "x=y,c='d'"))),
    ('{le="+Inf",model="m",quantile="0.5"}', (("le", "+Inf"), ("model", "m"),
                                              ("quantile", "0.5"))),
    ('{a="x__y",b="__"}', (("a", "x__y"), ("b", "__"))),
])
def test_plainly_spelled_label_blocks_read_like_any_other(block, pairs):
    # the one-findall path for blocks without spaces or escapes gives the same pairs as
    # the same block spelled with spaces (the general path)
    spaced = block.replace('",', '" , ').replace("{", "{ ")
    assert parse_label_block(block) == parse_label_block(spaced) == pairs


@pytest.mark.parametrize("bad", ['{a="1",a="2"}', '{__name__="x"}', '{a="1",,}', "{,}",
                                 '{a="1"b="2"}', '{a="1",__b="2"}'])
def test_plainly_spelled_label_blocks_are_refused_alike(bad):
    # a block the plain pattern matches but the rules refuse (a repeated or reserved
    # name) is refused as the general path refuses it; so are near-plain spellings
    with pytest.raises(ExpositionError):
        parse_label_block(bad)


@pytest.mark.parametrize("block", ["", '{b="2",a="1"}', '{le="+inf",b="x",a="y"}',
                                   '{model="a\\"b\\\\c\\nd",quantile="0.50",version="%s"}',
                                   '{a="x__y"}'])
@pytest.mark.parametrize("group_first", [False, True])
def test_a_label_blocks_identity_is_its_labels_sorted_and_rendered(block, group_first):
    # canonical(): every label sorted by name, rendered (values escaped) as render_labels
    # writes them; grouping(): the same without le/quantile; either asked first
    b = read_block(block, 4096).mapped({})
    assert b.labels is not None
    everything = render_labels(tuple(sorted(b.labels.items())))
    grouped = render_labels(tuple(sorted(p for p in b.labels.items()
                                         if p[0] not in ("le", "quantile"))))
    if group_first:
        assert b.grouping() == grouped
    assert (b.canonical(), b.grouping()) == (everything, grouped)
