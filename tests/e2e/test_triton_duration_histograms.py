"""A real Triton with ``--metrics-config histogram_latencies=true``: fleetwatch maps the
``nv_inference_*_duration_histogram_us`` families when the server exports them and keeps
the mean form when it does not (the mapping picks what the exposition has).

The wheel's tritonserver (2.51) predates triton-inference-server/core PR 474, so on it this
checks the second half: the flag is accepted, no duration histogram appears, and the
request latency stays the mean form (only the +Inf bucket, counted by successes). A server
with the histograms takes the first branch; ``tests/exporters/sources/test_triton.py``
checks that mapping on an exposition written from the PR.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load import ranker_inputs
from fleetwatch.demo.triton import TritonServer
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.render import render
from fleetwatch.exporters.sources import SOURCES_BY_KIND, detect_kind

pytestmark = pytest.mark.triton

_HIST = "nv_inference_request_duration_histogram_us"
_FAMILY = "modelserver_request_duration_seconds"


@pytest.fixture(scope="module")
def triton_histograms() -> Iterator[TritonServer]:
    with TritonServer(extra_args=("--metrics-config=histogram_latencies=true",)) as server:
        yield server


def _ranker_lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.startswith(prefix) and 'model="ranker"' in line
            and 'version="1"' in line.replace("model_version", "version")]


def test_request_latency_follows_what_the_server_exports(triton_histograms):
    result = send_requests(triton_histograms.http_address, "ranker", inputs=ranker_inputs,
                           model_version="1", requests=20, concurrency=2)
    assert result.succeeded == 20, result.errors
    upstream = triton_histograms.metrics_text()
    assert detect_kind(upstream) == "triton"
    out = render([Normalizer(SOURCES_BY_KIND["triton"].table).normalize(upstream)])
    buckets = _ranker_lines(out, f"{_FAMILY}_bucket")
    finite = [b for b in buckets if 'le="+Inf"' not in b]
    count = float(_ranker_lines(out, f"{_FAMILY}_count")[0].rsplit(" ", 1)[1])
    if _ranker_lines(upstream, f"{_HIST}_count"):
        upstream_count = float(_ranker_lines(upstream, f"{_HIST}_count")[0].rsplit(" ", 1)[1])
        assert finite, "the server exports the histogram, the mapping must keep its buckets"
        assert count == upstream_count
    else:
        success = float(_ranker_lines(upstream, "nv_inference_request_success")[0]
                        .rsplit(" ", 1)[1])
        assert not finite, f"no upstream histogram, yet buckets: {finite}"
        assert len(buckets) == 1
        assert count == success >= 20
