"""Triton model configurations from a model repository's ``config.pbtxt`` files.

Parsed with protobuf's ``text_format`` against Triton's own ``model_config.proto``
(``ModelConfig``, as compiled into ``tritonclient.grpc.model_config_pb2`` of the
``tritonclient`` package, the ``triton`` extra), then turned into the JSON form Triton's
``GET /v2/models/<m>/config`` answers (protobuf's JSON mapping with the proto field names,
``preserving_proto_field_name``), so that the lint reads one form.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format

from fleetwatch.specfile import read_text

#: Model directories read at most from one repository.
MAX_MODELS = 10_000
#: A ``config.pbtxt`` larger than this is refused (bytes).
MAX_CONFIG_BYTES = 4 * 1024 * 1024


class RepositoryError(ValueError):
    """A model repository or configuration that cannot be read; the message names the file."""


class ParserMissingError(RuntimeError):
    """The installation lacks Triton's ``ModelConfig`` parser (tritonclient, the ``triton``
    extra): nothing is wrong with the repository."""


@dataclass(frozen=True, slots=True)
class RepositoryModel:
    """One model directory: its ``name`` (the configuration's ``name``, else the
    directory's), its ``config`` in Triton's JSON form and the ``path`` read."""

    name: str
    config: dict[str, Any]
    path: Path


def _model_config_class() -> Any:
    try:
        module = importlib.import_module("tritonclient.grpc.model_config_pb2")
    except ImportError as exc:
        raise ParserMissingError(
            f"reading config.pbtxt needs tritonclient ({exc}); install the 'triton' extra "
            "(pip install '.[triton]' from a clone) or pip install 'tritonclient[grpc]'"
        ) from None
    return module.ModelConfig


def parse_config(text: str, source: str) -> dict[str, Any]:
    """One ``config.pbtxt`` text as Triton's JSON form; :class:`RepositoryError` naming
    ``source`` and the parser's line and column when it is not a valid ``ModelConfig``."""
    message = _model_config_class()()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        raise RepositoryError(f"{source}: not a Triton model configuration: {exc}") from None
    doc: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return doc


def read_repository(root: Path) -> list[RepositoryModel]:
    """Every ``<model>/config.pbtxt`` under ``root``, sorted by directory; raises
    :class:`RepositoryError` for a path that is not a directory, a directory without any
    ``*/config.pbtxt`` (nothing to check is not a pass), a file too large or one that does
    not parse; :class:`ParserMissingError` without tritonclient."""
    if not root.is_dir():
        raise RepositoryError(f"{root}: not a directory (expected a Triton model repository)")
    out = []
    for path in sorted(root.glob("*/config.pbtxt"))[:MAX_MODELS]:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise RepositoryError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
        doc = parse_config(read_text(path, RepositoryError), str(path))
        out.append(RepositoryModel(str(doc.get("name") or path.parent.name), doc, path))
    if not out:
        raise RepositoryError(f"{root}: no <model>/config.pbtxt in it (expected a Triton "
                              "model repository)")
    return out
