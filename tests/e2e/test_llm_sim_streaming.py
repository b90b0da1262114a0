"""The live experiment's replica (``benchmarks/autoscale/model_repository/llm_sim``) on a
real tritonserver: what its generate stream delivers.

Each request gets exactly the tokens it asked for, once, in the chunks of vLLM's
``--stream-interval`` rule as the model's configuration sets it (the first token alone,
then chunks of the interval, the rest at the end), and the model's own
``vllm:generation_tokens_total`` counts the same tokens. One request at a time, so the
chunks do not depend on the machine's speed: the delayed first token of a request is
always out before the step that makes its next token ends.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest
from benchmarks.autoscale.fleet import MODEL, MODEL_REPOSITORY
from benchmarks.autoscale.llm_engine import CALIBRATED, TOKEN_TEXT, EngineConfig

from fleetwatch.demo.triton import TritonServer

pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def server() -> Iterator[TritonServer]:
    with TritonServer([MODEL], MODEL_REPOSITORY) as triton:
        yield triton


def _config(server: TritonServer) -> EngineConfig:
    """The engine configuration the served model runs: `CALIBRATED` with the model
    configuration's ``ENGINE_CONFIG`` overrides, read back from Triton."""
    url = f"{server.http_url}/v2/models/{MODEL}/config"
    with urllib.request.urlopen(url, timeout=10) as response:
        config = json.loads(response.read())
    overrides = config.get("parameters", {}).get("ENGINE_CONFIG", {}).get("string_value")
    return replace(CALIBRATED, **json.loads(overrides)) if overrides else CALIBRATED


def _stream(server: TritonServer, max_tokens: int) -> list[str]:
    """The ``text_output`` of every event of one generate_stream request."""
    body = json.dumps({"text_input": "x" * 140, "max_tokens": max_tokens}).encode()
    request = urllib.request.Request(f"{server.http_url}/v2/models/{MODEL}/generate_stream",
                                     body, {"Content-Type": "application/json"})
    texts = []
    with urllib.request.urlopen(request, timeout=60) as response:
        for line in response:
            if line.startswith(b"data:"):
                texts.append(json.loads(line[len(b"data:"):])["text_output"])
    return texts


def _generation_tokens(server: TritonServer) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        lines = response.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines
               if line.startswith("vllm:generation_tokens_total{"))


def test_the_served_model_streams_in_chunks(server: TritonServer) -> None:
    """The repository's model configuration sets a stream interval above 1 (the reason
    the chunked path exists), and Triton serves that configuration."""
    assert _config(server).stream_interval > 1


@pytest.mark.parametrize("tokens", [1, 2, 3, 9, 20, 48])
def test_every_token_arrives_once_in_stream_interval_chunks(server: TritonServer,
                                                            tokens: int) -> None:
    config = _config(server)
    before = _generation_tokens(server)
    texts = _stream(server, tokens)
    sizes = [text.count(TOKEN_TEXT) for text in texts]
    assert "".join(texts) == TOKEN_TEXT * tokens
    assert sizes == config.chunk_sizes(tokens)
    assert _generation_tokens(server) - before == tokens
