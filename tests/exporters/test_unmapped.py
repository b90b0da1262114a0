"""Samples no rule maps: ignored, invalid or unmapped (exporters/unmapped.py), under the
real Triton table."""

from __future__ import annotations

from fleetwatch.exporters.entry import NOT_DATA
from fleetwatch.exporters.parser import Metadata
from fleetwatch.exporters.sources import TABLES
from fleetwatch.exporters.unmapped import UnmappedSamples
from fleetwatch.exporters.validate import TYPE_MISMATCH

HIST = "nv_inference_request_duration_histogram_us"  # a histogram a Triton rule reads


def _samples() -> UnmappedSamples:
    return UnmappedSamples(TABLES["triton"].rules)


def test_created_samples_of_a_known_family_are_not_data() -> None:
    assert _samples().unused("nv_inference_request_success_created", Metadata(), ()) \
        is NOT_DATA


def test_a_known_familys_sample_of_another_type_is_invalid() -> None:
    # a counter a Triton rule reads, written with a histogram's suffix
    entry = _samples().unused("nv_inference_request_success_bucket", Metadata(), ())
    assert entry.error is not None and "is not a sample of counter family" in entry.error
    assert entry.unmapped_family is None
    # a sample the type has, that no rule uses: nothing to emit, no error
    entry = _samples().unused(HIST + "_created", Metadata(types={HIST: "histogram"}), ())
    assert entry.error is None and entry.unmapped_family is None


def test_an_unknown_sample_is_unmapped_in_the_family_its_type_lines_name() -> None:
    meta = Metadata(types={"my_latency": "histogram"})
    entry = _samples().unused("my_latency_bucket", meta, (("le", "0.5"),))
    assert (entry.unmapped_family, entry.ptype, entry.error) == ("my_latency", "histogram",
                                                                 None)
    assert entry.types_seen is not None and "my_latency" in entry.types_seen[0]
    # without its le a bucket would make a Prometheus reject the scrape
    bad = _samples().unused("my_latency_bucket", meta, ())
    assert bad.reason == TYPE_MISMATCH and bad.unmapped_family == "my_latency"


def test_the_family_guess_depends_on_the_type_lines_read() -> None:
    samples = _samples()
    assert samples.family_of("foo_total", Metadata()) == "foo_total"
    assert samples.family_of("foo_total", Metadata(types={"foo": "counter"})) == "foo"
    assert samples.family_of("foo_created", Metadata(types={"foo_total": "counter"})) \
        == "foo_total"
    assert samples.family_of(HIST + "_sum", Metadata()) == HIST  # a family a rule reads
    seen = samples.types_read("foo_total", Metadata(types={"foo": "counter"}))
    assert seen == (("foo_total", "foo"), (None, "counter"))
    assert samples.types_read("foo_total", Metadata(types={"foo": "counter"})) is seen
    assert samples.unmatched("foo_total", Metadata()).unmapped_family == "foo_total"
