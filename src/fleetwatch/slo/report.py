"""``fleetwatch slo report``: the SLO engine's view, read back from Prometheus.

Queries a Prometheus that scrapes the sidecars (HTTP API ``/api/v1/query``) for the
engine's gauges and prints, per SLO, model and sidecar instance: state, error budget
remaining, capacity at SLO, observed concurrency and burn rates by window (overall and
per concurrency band) — as a rich table or JSON.

Whatever Prometheus answers, the outcome is a report or one clean error line: an HTTP
error (with Prometheus' own ``errorType: error`` when it sends one), a body that is not
JSON or not an instant vector, ``status: error``, a body larger than :data:`MAX_BODY_BYTES`
or slower than ``timeout`` in total raise :class:`ReportError` (the CLI exits 1); a URL that
is not ``http(s)://host[:port]`` or a timeout that is not positive raise
:class:`ReportInputError` (exit 2). Odd samples are tolerated: a value that is NaN, ±Inf or
not a number is reported as no value (``null``, ``-``), a sample without the label it is
keyed by (``state``, ``window``, ``band``) is skipped, and label values are printed as
text — rich markup and terminal control characters are shown, never interpreted.
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict

import click

KEY = ("slo", "model", "model_version", "backend", "instance")
#: The largest answer read from Prometheus (a report of a big fleet is a few MiB).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Characters of Prometheus' own text (an error message) kept in an error line.
_DETAIL_CHARS = 300


class ReportError(RuntimeError):
    """Prometheus could not be queried (message says which URL and why)."""


class ReportInputError(click.ClickException):
    """A ``--prometheus`` URL or ``--timeout`` that cannot work: bad input, exit 2, one
    ``fleetwatch: error:`` line (click reports it for the CLI)."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"fleetwatch: error: {self.format_message()}", err=True)


def printable(text: str) -> str:
    """``text`` with control and format characters (ESC, NUL, bidi overrides, line breaks)
    written as escapes (``\\x1b``), so that a label value cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else
                   f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in text)


def _detail(text: str) -> str:
    """Prometheus' text for an error line: one line, printable, bounded."""
    one = printable(" ".join(str(text).split()))
    return one if len(one) <= _DETAIL_CHARS else one[:_DETAIL_CHARS] + "…"


def check_target(base: str, timeout: float) -> None:
    """Raise :class:`ReportInputError` unless ``base`` is an ``http(s)://host[:port]`` URL
    and ``timeout`` a positive number of seconds."""
    where = f"--prometheus {_detail(repr(base))}"
    try:
        parts = urllib.parse.urlsplit(base)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ReportInputError(f"{where}: not a URL ({_detail(str(exc))})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReportInputError(f"{where}: not an http(s) URL with a host "
                               "(e.g. http://127.0.0.1:9090)")
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise ReportInputError(f"--timeout {timeout!r}: must be a positive number of seconds")


class _HTTPRedirectsOnly(urllib.request.HTTPRedirectHandler):
    """Redirects are followed to http(s) URLs only (urllib would follow one to ftp://)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            raise urllib.error.HTTPError(newurl, code, f"redirect to {_detail(newurl)} refused",
                                         headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HTTPRedirectsOnly)


def _read(resp: http.client.HTTPResponse, base: str, deadline: float) -> bytes:
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise ReportError(f"cannot query Prometheus at {base}: timed out (the answer "
                              "did not arrive within --timeout)")
        chunk = resp.read1(65536)
        if not chunk:
            if getattr(resp, "length", None):  # Content-Length bytes still missing
                raise ReportError(f"cannot query Prometheus at {base}: the answer was cut "
                                  f"short ({resp.length} bytes missing)")
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ReportError(f"Prometheus at {base} answered more than "
                              f"{MAX_BODY_BYTES // 2**20} MiB")
        chunks.append(chunk)


def _http_error(exc: urllib.error.HTTPError, base: str, deadline: float) -> ReportError:
    """An HTTP error status, with Prometheus' ``errorType: error`` when the body has it."""
    status = " ".join(x for x in (str(exc.code), _detail(exc.reason or "")) if x)
    detail = ""
    try:
        if exc.fp is not None:
            body = json.loads(_read(exc.fp, base, deadline))
            if isinstance(body, dict) and body.get("error"):
                detail = (f": {_detail(body.get('errorType') or 'error')}: "
                          f"{_detail(body['error'])}")
    except (ReportError, ValueError, RecursionError, OSError, AttributeError,
            http.client.HTTPException):
        pass  # no Prometheus error in the body: the status says enough
    finally:
        exc.close()
    return ReportError(f"Prometheus at {base} answered HTTP {status}{detail}")


def query(base: str, promql: str, timeout: float = 10.0) -> list[dict]:
    """Instant query; returns the ``data.result`` vector (samples whose ``metric`` is a
    mapping). Raises :class:`ReportError` (see the module docstring)."""
    url = f"{base.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    deadline = time.monotonic() + timeout
    try:
        with _OPENER.open(url, timeout=timeout) as resp:
            raw = _read(resp, base, deadline)
    except urllib.error.HTTPError as exc:
        raise _http_error(exc, base, deadline) from None
    except urllib.error.URLError as exc:
        raise ReportError(f"cannot query Prometheus at {base}: "
                          f"{_detail(str(exc.reason))}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise ReportError(f"cannot query Prometheus at {base}: "
                          f"{_detail(str(exc) or type(exc).__name__)}") from None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise ReportError(f"Prometheus at {base} answered {promql!r} with something that is "
                          f"not JSON: {_detail(raw[:80].decode('utf-8', 'replace'))}") from None
    if not isinstance(body, dict):
        raise ReportError(f"Prometheus at {base} answered {promql!r} with JSON that is not a "
                          "Prometheus API answer")
    if body.get("status") != "success":
        raise ReportError(f"Prometheus at {base} answered {promql!r} with status "
                          f"{_detail(repr(body.get('status')))}: "
                          f"{_detail(body.get('errorType') or 'error')}: "
                          f"{_detail(body.get('error') or 'no error message')}")
    data = body.get("data")
    if not (isinstance(data, dict) and isinstance(data.get("result"), list)
            and data.get("resultType", "vector") == "vector"):
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise ReportError(f"Prometheus at {base} answered {promql!r} without an instant "
                          f"vector (resultType {_detail(repr(kind))})")
    return [s for s in data["result"] if isinstance(s, dict) and isinstance(s.get("metric"),
                                                                           dict)]


def _value(sample: dict) -> float | None:
    """The sample's value, or None when it is missing, not a number, NaN or ±Inf."""
    pair = sample.get("value")
    if not (isinstance(pair, list) and len(pair) == 2):
        return None
    try:
        v = float(pair[1])
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _labels(sample: dict) -> dict[str, str]:
    return {str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in sample["metric"].items()}


def fetch_report(base: str, timeout: float = 10.0) -> list[dict]:
    """One dict per (SLO, model, version, backend, instance), sorted."""
    check_target(base, timeout)
    rows: dict[tuple, dict] = defaultdict(lambda: {"burn_rates": defaultdict(dict)})

    def key(m: dict) -> tuple:
        return tuple(m.get(k, "") for k in KEY)

    for s in query(base, "fleetwatch_slo_state == 1", timeout):
        m = _labels(s)
        if "state" in m:
            rows[key(m)]["state"] = m["state"]
    for name, field in (("fleetwatch_slo_error_budget_remaining_ratio", "budget_remaining"),
                        ("fleetwatch_slo_capacity_concurrency", "capacity")):
        for s in query(base, name, timeout):
            rows[key(_labels(s))][field] = _value(s)
    for s in query(base, "fleetwatch_slo_burn_rate", timeout):
        m = _labels(s)
        if "window" in m and "band" in m:
            rows[key(m)]["burn_rates"][m["window"]][m["band"]] = _value(s)
    conc = {tuple(_labels(s).get(k, "") for k in KEY[1:]): _value(s)
            for s in query(base, "fleetwatch_slo_concurrency", timeout)}
    out = []
    for k in sorted(rows):
        row = {**dict(zip(KEY, k, strict=True)), **rows[k]}
        row["burn_rates"] = {w: dict(b) for w, b in row["burn_rates"].items()}
        row["concurrency"] = conc.get(k[1:])
        out.append(row)
    return out


def render_table(report: list[dict]) -> None:
    """Print the report with rich: one row per SLO/model/instance, overall burn rates by
    window, and the bands that burn faster than 1 in the longest window. Label values are
    plain text (never rich markup), with control characters escaped."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: object) -> Text:
        return Text(printable(str(value)))

    windows = sorted({w for r in report for w in r["burn_rates"]}, key=_window_order)
    table = Table(title="fleetwatch SLOs")
    for col in ("SLO", "model", "version", "instance", "state", "budget left", "capacity",
                "concurrency", *(f"burn {w}" for w in windows), "bands burning (longest)"):
        table.add_column(cell(col))
    for r in report:
        burns = [_fmt(r["burn_rates"].get(w, {}).get("all")) for w in windows]
        longest = r["burn_rates"].get(windows[-1], {}) if windows else {}
        hot = ", ".join(b for b, v in longest.items() if b != "all" and v is not None and v > 1)
        table.add_row(*(cell(v) for v in (
            r["slo"], r["model"], r["model_version"], r["instance"], r.get("state", "?"),
            _fmt(r.get("budget_remaining"), pct=True), _fmt(r.get("capacity")),
            _fmt(r.get("concurrency")), *burns, hot or "-")))
    Console().print(table)


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v * 100:.1f}%" if pct else f"{v:.3g}"


def _window_order(w: str) -> tuple[float, str]:
    """Windows by length (``5m`` < ``1h``); labels that are not durations last, by name."""
    from fleetwatch.slo.spec import parse_duration

    try:
        return (parse_duration(w), w)
    except ValueError:
        return (math.inf, w)
