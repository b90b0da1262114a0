"""Strict JSON out of the sidecar: ``null`` where a number is not finite, never ``NaN``.

Python's ``json`` writes ``NaN``/``Infinity`` by default, which is not JSON (RFC 8259)
and which most clients (Go's ``encoding/json``, KEDA, ``jq``) reject. Every JSON answer
(``/readyz``, ``/slo``, ``/autoscaling``) goes through :func:`json_response`: non-finite
floats become ``null`` and the text is written with ``allow_nan=False``.
"""

from __future__ import annotations

import json
import math

from aiohttp import web


def finite(obj: object) -> object:
    """``obj`` (JSON types: dict, list, tuple, str, numbers, bool, None) with every
    non-finite float replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: object) -> str:
    """Strict JSON text of ``obj`` (see :func:`finite`)."""
    return json.dumps(finite(obj), allow_nan=False)


def json_response(obj: object, status: int = 200) -> web.Response:
    """An ``application/json`` answer holding strict JSON."""
    return web.json_response(obj, status=status, dumps=dumps)
