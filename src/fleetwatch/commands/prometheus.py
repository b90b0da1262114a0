"""A small Prometheus HTTP API client: instant queries (``/api/v1/query``) and range
queries (``/api/v1/query_range``) that end in an answer or one clean :class:`PrometheusError`.

An HTTP error (with Prometheus' own ``errorType: error`` when it sends one), a body that is
not JSON or not an instant vector, ``status: error``, a body larger than
:data:`MAX_BODY_BYTES`, cut short, or slower than ``timeout`` in total all raise
:class:`PrometheusError` naming the URL and why. Redirects are followed to http(s) URLs
only. Foreign text in messages is one line, printable and bounded
(:func:`fleetwatch.slo.outputs.report.detail`).

An answer is data from another program, checked like a file: given an :class:`Expected`,
every sample's value must be a finite number within its range, or the query raises
:class:`PrometheusError` naming the query, the series and the value (``Prometheus at URL
answered 'sum by (…) (…)' with {band="1", …} = -300: not an event count (a finite
number from 0 to 9.0072e+15)``) — a negative or absurd count is a broken exporter or a
corrupted store, and a comparison or baseline built on it would be wrong with exit 0.
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import IO, Any

from fleetwatch.slo.outputs.report import detail

#: The largest answer read from Prometheus (a report of a big fleet is a few MiB).
MAX_BODY_BYTES = 64 * 1024 * 1024


class PrometheusError(RuntimeError):
    """Prometheus could not be queried, or answered values it cannot have meant (message
    says which URL, query and series, and why)."""


@dataclass(frozen=True, slots=True)
class Expected:
    """What every sample value of an answer must be: a finite number from ``low`` to
    ``high``; ``what`` names it in the error (``an event count``, ``a latency in
    seconds``)."""

    what: str
    high: float
    low: float = 0.0


def _series(metric: dict[str, Any]) -> str:
    """A sample's series as PromQL writes it, bounded: ``name{a="1", b="2"}``."""
    name = str(metric.get("__name__", ""))
    labels = ", ".join(f"{k}={json.dumps(str(v))}" for k, v in sorted(metric.items())
                       if k != "__name__")
    return detail(f"{name}{{{labels}}}")


def check_values(base: str, promql: str, samples: list[dict[str, Any]],
                 expected: Expected) -> None:
    """Raise :class:`PrometheusError` at the first sample of ``samples`` (an instant
    vector's items) whose value is not a finite number within ``expected``."""
    for s in samples:
        pair = s.get("value")
        raw = pair[1] if isinstance(pair, list) and len(pair) == 2 else None
        try:
            v = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            v = math.nan
        if not (math.isfinite(v) and expected.low <= v <= expected.high):
            raise PrometheusError(
                f"Prometheus at {base} answered {detail(promql)!r} with "
                f"{_series(s['metric'])} = {detail(str(raw))}: not {expected.what} (a "
                f"finite number from {expected.low:g} to {expected.high:g})")


class _HTTPRedirectsOnly(urllib.request.HTTPRedirectHandler):
    """Redirects are followed to http(s) URLs only (urllib would follow one to ftp://)."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int,
                         msg: str, headers: http.client.HTTPMessage,
                         newurl: str) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            raise urllib.error.HTTPError(newurl, code, f"redirect to {detail(newurl)} refused",
                                         headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HTTPRedirectsOnly)


def _read(resp: Any, base: str, deadline: float) -> bytes:
    """The whole body of ``resp`` (an ``http.client.HTTPResponse`` or the file of an
    ``HTTPError``), within ``deadline`` (``time.monotonic()``) and :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise PrometheusError(f"cannot query Prometheus at {base}: timed out (the answer "
                                  "did not arrive within --timeout)")
        chunk: bytes = resp.read1(65536)
        if not chunk:
            if getattr(resp, "length", None):  # Content-Length bytes still missing
                raise PrometheusError(f"cannot query Prometheus at {base}: the answer was "
                                      f"cut short ({resp.length} bytes missing)")
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PrometheusError(f"Prometheus at {base} answered more than "
                                  f"{MAX_BODY_BYTES // 2**20} MiB")
        chunks.append(chunk)


def _http_error(exc: urllib.error.HTTPError, base: str, deadline: float) -> PrometheusError:
    """An HTTP error status, with Prometheus' ``errorType: error`` when the body has it."""
    status = " ".join(x for x in (str(exc.code), detail(exc.reason or "")) if x)
    extra = ""
    try:
        if exc.fp is not None:
            body = json.loads(_read(exc.fp, base, deadline))
            if isinstance(body, dict) and body.get("error"):
                extra = (f": {detail(body.get('errorType') or 'error')}: "
                         f"{detail(body['error'])}")
    except (PrometheusError, ValueError, RecursionError, OSError, AttributeError,
            http.client.HTTPException):
        pass  # no Prometheus error in the body: the status says enough
    finally:
        exc.close()
    return PrometheusError(f"Prometheus at {base} answered HTTP {status}{extra}")


def _answer(base: str, path: str, params: dict[str, str], promql: str,
            timeout: float) -> dict[str, Any]:
    """The ``data`` of a successful Prometheus API answer to ``GET path?params``."""
    url = f"{base.rstrip('/')}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    deadline = time.monotonic() + timeout
    try:
        with _OPENER.open(url, timeout=timeout) as resp:
            raw = _read(resp, base, deadline)
    except urllib.error.HTTPError as exc:
        raise _http_error(exc, base, deadline) from None
    except urllib.error.URLError as exc:
        raise PrometheusError(f"cannot query Prometheus at {base}: "
                              f"{detail(str(exc.reason))}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise PrometheusError(f"cannot query Prometheus at {base}: "
                              f"{detail(str(exc) or type(exc).__name__)}") from None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise PrometheusError(
            f"Prometheus at {base} answered {promql!r} with something that is not JSON: "
            f"{detail(raw[:80].decode('utf-8', 'replace'))}") from None
    if not isinstance(body, dict):
        raise PrometheusError(f"Prometheus at {base} answered {promql!r} with JSON that is "
                              "not a Prometheus API answer")
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {base} answered {promql!r} with status "
                              f"{detail(repr(body.get('status')))}: "
                              f"{detail(body.get('errorType') or 'error')}: "
                              f"{detail(body.get('error') or 'no error message')}")
    data = body.get("data")
    return data if isinstance(data, dict) else {}


def _result(base: str, promql: str, data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """``data.result`` of an answer whose ``resultType`` is ``kind`` (only samples whose
    ``metric`` is a mapping)."""
    if not (isinstance(data.get("result"), list) and data.get("resultType", kind) == kind):
        name = "an instant vector" if kind == "vector" else "a range vector"
        raise PrometheusError(f"Prometheus at {base} answered {promql!r} without {name} "
                              f"(resultType {detail(repr(data.get('resultType')))})")
    return [s for s in data["result"]
            if isinstance(s, dict) and isinstance(s.get("metric"), dict)]


def query(base: str, promql: str, timeout: float = 10.0,
          expected: Expected | None = None) -> list[dict[str, Any]]:
    """Instant query of ``promql`` at the Prometheus ``base`` URL within ``timeout``
    seconds; returns the ``data.result`` vector (only samples whose ``metric`` is a
    mapping), each value checked against ``expected`` when given
    (:func:`check_values`). Raises :class:`PrometheusError` (see the module
    docstring)."""
    data = _answer(base, "query", {"query": promql}, promql, timeout)
    result = _result(base, promql, data, "vector")
    if expected is not None:
        check_values(base, promql, result, expected)
    return result


def query_range(base: str, promql: str, start: float, end: float, step: float,
                expected: Expected, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Range query of ``promql`` from ``start`` to ``end`` (seconds since the epoch)
    every ``step`` seconds; returns the ``data.result`` matrix: items with ``metric``
    and ``values`` (``[[t, "v"], …]``), every value checked against ``expected``.
    Raises :class:`PrometheusError` (see the module docstring)."""
    params = {"query": promql, "start": repr(start), "end": repr(end), "step": repr(step)}
    data = _answer(base, "query_range", params, promql, timeout)
    result = _result(base, promql, data, "matrix")
    for s in result:
        values = s.get("values")
        if not isinstance(values, list):
            raise PrometheusError(f"Prometheus at {base} answered {promql!r} with "
                                  f"{_series(s['metric'])} without values")
        check_values(base, promql, [{"metric": s["metric"], "value": v} for v in values],
                     expected)
    return result
