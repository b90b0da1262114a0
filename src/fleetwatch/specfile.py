"""Reading the YAML files fleetwatch takes (sidecar config, registry, SLOs, alerting
config) and saying what is wrong with them: one place, so every file gets the same
errors — ``FILE: cannot read …``, ``FILE: not UTF-8 text``, ``FILE: not valid YAML`` and,
for a pydantic validation error, one line per problem ``FILE: a.b[2].c: message``."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: str | Path, error: type[Exception], what: str) -> object:
    """Parsed YAML of ``path``; raises ``error`` (e.g. ``ConfigError``) naming the file
    when it cannot be read, is not UTF-8 or is not YAML. ``what`` names the file's role in
    messages ("configuration", "registry", …)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{p}: not UTF-8 text (byte {exc.start}): cannot read {what}") from None
    except OSError as exc:
        raise error(f"{p}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{p}: not valid YAML: {exc}") from None


def validate(model: type[M], data: object, source: str, error: type[Exception],
             expected: str) -> M:
    """``model.model_validate(data)``; raises ``error`` naming ``source`` and each field,
    or saying ``expected`` (e.g. "a mapping with a 'targets:' list") for a non-mapping."""
    if not isinstance(data, dict):
        raise error(f"{source}: expected {expected}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(format_validation_error(exc, source)) from None


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One line per error: ``SOURCE: a.b[2].c: message`` (``unknown field`` for extras)."""
    lines = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{source}: {path or '(top level)'}: {msg}")
    return "\n".join(lines)
