"""A model's warm-up set: the requests to send before it takes traffic (registry field
``warmup:``), read by ``fleetwatch warmup`` (which sends them) and the sidecar (which keeps
``/readyz`` not ready until they ran when ``gate: required``).

An LLM or a classic model must often run a representative set of requests — reflecting
the real input-length distribution — before taking traffic, or its first requests spike
(kernel compilation, cache initialisation). In the registry::

    models:
      - name: tiny-llm
        ...
        warmup:
          gate: required          # required: /readyz waits for it; optional (default): not
          protocol: openai        # openai (vLLM's OpenAI API) | http | grpc (Triton)
          count: 12               # requests to send (1–10000), one at a time
          llm:                    # an LLM: prompt lengths and output budget
            unit: words           # words (text) or tokens (token-id prompts)
            lengths: [24, 64, 200]  # prompt lengths drawn from, with optional weights
            weights: [2, 1, 1]
            max_tokens: 16
            endpoint: completions # completions | chat (chat: words only)
      - name: ranker
        ...
        warmup:
          protocol: grpc
          url: 127.0.0.1:8001     # optional; default from the sidecar target (see docs)
          count: 20
          inputs:                 # a classic model: each input tensor
            - {name: INPUT0, datatype: FP32, shape: [16]}
          batch_sizes: [1, 4, 8]  # each request's batch dimension, in turn (none: no
                                  # batch dimension is added)

Exactly one of ``llm`` (with ``protocol: openai``) and ``inputs`` (with ``http`` or
``grpc``) is given. Validation is strict like the rest of the registry.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Triton tensor data types a warm-up input may have (Triton's ``TYPE_*`` without it,
#: docs/user_guide/model_configuration.md) and the numpy dtype of each.
NUMPY_DTYPES = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32",
                "UINT64": "uint64", "INT8": "int8", "INT16": "int16", "INT32": "int32",
                "INT64": "int64", "FP16": "float16", "FP32": "float32", "FP64": "float64"}
DATATYPES = tuple(NUMPY_DTYPES)
#: Most requests one warm-up may send.
MAX_COUNT = 10_000
#: The largest tensor dimension or batch size of a warm-up input (2^31 - 1).
MAX_DIM = 2**31 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LLMWarmup(_Strict):
    """Prompt lengths (in ``unit``), their relative weights (default equal), the output
    budget (tokens) and the endpoint of an LLM's warm-up requests."""

    unit: Literal["words", "tokens"] = "words"
    lengths: list[int] = Field(min_length=1, max_length=1000)
    weights: list[Annotated[float, Field(allow_inf_nan=False, le=1e9)]] | None = None
    max_tokens: int = Field(16, ge=1, le=100_000)
    endpoint: Literal["completions", "chat"] = "completions"

    @model_validator(mode="after")
    def _consistent(self) -> LLMWarmup:
        if any(n < 1 or n > 1_000_000 for n in self.lengths):
            raise ValueError("lengths: every prompt length is 1 … 1000000")
        if self.weights is not None:
            if len(self.weights) != len(self.lengths):
                raise ValueError(f"weights: {len(self.weights)} weights for "
                                 f"{len(self.lengths)} lengths")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights: non-negative, not all 0")
        if self.unit == "tokens" and self.endpoint == "chat":
            raise ValueError("unit tokens needs endpoint completions (a chat message is text)")
        return self


class TensorSpec(_Strict):
    """One input tensor: its name, Triton data type and shape (positive dimensions; the
    batch dimension is not included when ``batch_sizes`` is given)."""

    name: str = Field(min_length=1)
    datatype: str
    shape: list[int] = Field(max_length=8)

    @model_validator(mode="after")
    def _positive(self) -> TensorSpec:
        if self.datatype not in NUMPY_DTYPES:
            raise ValueError(f"datatype {self.datatype!r}: one of {', '.join(DATATYPES)}")
        if any(d < 1 for d in self.shape):
            raise ValueError(f"shape {self.shape}: every dimension is a positive size "
                             "(write the warm-up's concrete shape, not -1)")
        if any(d > MAX_DIM for d in self.shape):
            raise ValueError(f"shape: every dimension is at most {MAX_DIM} (Triton's int32 "
                             "dimension range)")
        return self


class WarmupSpec(_Strict):
    """A model's warm-up (see the module doc)."""

    gate: Literal["required", "optional"] = "optional"
    protocol: Literal["openai", "http", "grpc"]
    count: int = Field(ge=1, le=MAX_COUNT)
    url: str | None = Field(None, min_length=1)
    timeout_seconds: float = Field(60.0, gt=0, le=3600)
    llm: LLMWarmup | None = None
    inputs: list[TensorSpec] | None = Field(None, min_length=1, max_length=64)
    batch_sizes: list[int] | None = Field(None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _one_kind(self) -> WarmupSpec:
        if self.protocol == "openai":
            if self.llm is None or self.inputs is not None or self.batch_sizes is not None:
                raise ValueError("protocol openai takes llm: (prompt lengths, max_tokens), "
                                 "not inputs:/batch_sizes:")
        elif self.inputs is None or self.llm is not None:
            raise ValueError(f"protocol {self.protocol} (Triton) takes inputs: (tensor "
                             "names, datatypes, shapes), not llm:")
        if self.batch_sizes is not None and any(not 1 <= b <= MAX_DIM
                                                for b in self.batch_sizes):
            raise ValueError(f"batch_sizes: every batch size is 1 … {MAX_DIM}")
        return self

    @property
    def required(self) -> bool:
        """Whether readiness waits for this warm-up."""
        return self.gate == "required"


__all__ = ["DATATYPES", "MAX_COUNT", "NUMPY_DTYPES", "LLMWarmup", "TensorSpec", "WarmupSpec"]
