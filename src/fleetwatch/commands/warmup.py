"""``fleetwatch warmup --config FILE [--model M]``: send each model's registry warm-up set
(:mod:`fleetwatch.labels.warmup`) to its server, one request at a time, and print the
latencies of the first and the last requests.

Which server: the spec's ``url`` when given, else the sidecar configuration's target —
for ``openai`` a ``vllm`` (or ``auto``) target: its ``api_url``, else the host of its
``url`` (vLLM serves the API and ``/metrics`` on one port); for ``http`` a ``triton``
target's ``api_url``; ``grpc`` needs the spec's ``url`` (the configuration has no gRPC
port). A target that lists ``models`` is only used for those. The warm-up goes to the
sidecar's own server instance, so an address must be loopback (:func:`run_warmups`
refuses others): through a load balancer it would warm a random replica. The requests go
through the clients of :mod:`fleetwatch.clients.openai` and :mod:`fleetwatch.clients.triton`.

Requests: an LLM's prompt lengths are drawn (seeded, so a warm-up is repeatable) from the
spec's ``lengths`` with its ``weights``; ``unit: tokens`` sends token-id prompts of exactly
that many tokens, ``words`` text of that many words. A classic model's requests take the
spec's ``inputs`` (zeros of each data type) with the batch sizes in turn.

Errors: a model not in the registry, without a ``warmup:`` spec, with no server to send
to, or that the server does not serve (vLLM's ``/v1/models``; Triton's model or version
readiness over HTTP) raises :class:`WarmupInputError` (exit 2); a request that fails (HTTP error,
connection refused, timeout, server exception) raises :class:`WarmupError` naming the
request and the reason (exit 1): a warm-up that cannot complete is not a warm-up.
"""

from __future__ import annotations

import asyncio
import fnmatch
import random
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwatch.clients.openai import LLMRequest, make_prompt, send_request
from fleetwatch.clients.triton.bounds import loopback_address
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.labels.warmup import NUMPY_DTYPES, WarmupSpec
from fleetwatch.sidecar.config import SidecarConfig, Target

#: Token ids of ``unit: tokens`` prompts are drawn from this range (inside any real
#: vocabulary, above the special tokens).
TOKEN_IDS = (100, 1000)
#: Latencies printed at each end.
SHOWN = 3


@dataclass(frozen=True)
class TokenRequest(LLMRequest):
    """A completion whose prompt is token ids (vLLM's OpenAI API takes a list of ints as
    ``prompt``): exactly ``len(token_ids)`` prompt tokens."""

    token_ids: tuple[int, ...] = ()

    def body(self, model: str) -> dict[str, object]:
        """The JSON body: the token ids as the prompt, greedy, not streamed."""
        return {"model": model, "max_tokens": self.max_tokens, "temperature": 0.0,
                "stream": False, "prompt": list(self.token_ids)}


class WarmupInputError(ValueError):
    """An unknown model, no warm-up spec, no server: exit 2."""


class WarmupError(RuntimeError):
    """The warm-up could not complete: exit 1."""


@dataclass(frozen=True)
class Plan:
    """One model's warm-up: where to send it and what."""

    model: str
    version: str
    spec: WarmupSpec
    url: str


def _exact_models(entry: ModelEntry, cfg: SidecarConfig) -> list[str]:
    """The model names an entry stands for: its name, or (a glob) the targets' models it
    matches."""
    if not set("*?[") & set(entry.name):
        return [entry.name]
    return sorted({m for t in cfg.targets for m in t.models
                   if fnmatch.fnmatchcase(m, entry.name)})


def _exact_version(entry: ModelEntry) -> str:
    """The entry's version when it names one exactly (else "": the server's default)."""
    v = entry.version or ""
    return "" if set("*?[") & set(v) else v


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def server_url(spec: WarmupSpec, model: str, cfg: SidecarConfig) -> str:
    """The server a warm-up is sent to (see the module doc); raises
    :class:`WarmupInputError` when there is none."""
    if spec.url:
        return spec.url
    if spec.protocol == "grpc":
        raise WarmupInputError(f"model {model}: warmup.protocol grpc needs warmup.url "
                               "(host:port of Triton's gRPC endpoint): the sidecar "
                               "configuration has no gRPC port")

    def serves(t: Target) -> bool:
        return not t.models or model in t.models

    if spec.protocol == "openai":
        found = [t for t in cfg.targets if t.kind in ("vllm", "auto") and serves(t)]
        if found:
            t = found[0]
            return _host(str(t.api_url)) if t.api_url else _host(str(t.url))
    else:
        found = [t for t in cfg.targets if t.kind in ("triton", "auto") and t.api_url
                 and serves(t)]
        if found:
            return _host(str(found[0].api_url))
    kind = "vllm" if spec.protocol == "openai" else "triton (with api_url)"
    raise WarmupInputError(f"model {model}: no {kind} target of the sidecar configuration "
                           "serves it; list it in a target's models or give warmup.url")


def plans(cfg: SidecarConfig, registry: Registry, model: str | None,
          version: str = "") -> list[Plan]:
    """The warm-ups to run: ``model``'s (raises :class:`WarmupInputError` when the
    registry does not know it or it has no spec), else every entry's with a spec. The
    version is ``version``, else the entry's when it names one exactly, else "" (the
    server's default: Triton's version policy)."""
    where = registry.source
    if model is not None:
        if version:
            entry = registry.lookup(model, version)
        else:  # no version given: the first entry of the name with a spec, else the first
            named = [e for e in registry.entries if fnmatch.fnmatchcase(model, e.name)]
            entry = next((e for e in named if e.warmup is not None), named[0] if named
                         else None)
        if entry is None:
            v = f" version {version!r}" if version else ""
            raise WarmupInputError(f"model {model}{v}: not in the registry {where}")
        if entry.warmup is None:
            raise WarmupInputError(f"model {model}: its registry entry (in {where}) has no "
                                   "warmup: spec")
        return [Plan(model, version or _exact_version(entry), entry.warmup,
                     server_url(entry.warmup, model, cfg))]
    out = []
    for e in registry.entries:
        if e.warmup is None:
            continue
        names = _exact_models(e, cfg)
        if not names:
            raise WarmupInputError(f"registry entry {e.name!r} (in {where}) is a glob that "
                                   "matches no model a target lists: give --model NAME")
        out += [Plan(m, version or _exact_version(e), e.warmup, server_url(e.warmup, m, cfg))
                for m in names]
    if not out:
        raise WarmupInputError(f"no registry entry (in {where or 'the configuration'}) has "
                               "a warmup: spec")
    return out


def draw_lengths(spec: WarmupSpec, seed: int = 0) -> list[int]:
    """The prompt length of each of an LLM warm-up's requests (in its ``unit``), drawn
    with ``seed`` from its lengths and weights (so a warm-up is repeatable)."""
    assert spec.llm is not None
    rng = random.Random(seed)
    return rng.choices(spec.llm.lengths, weights=spec.llm.weights, k=spec.count)


def llm_latencies(plan: Plan) -> list[float]:
    """Send an LLM's warm-up through vLLM's OpenAI API; the latency of each request
    (seconds, in order). Raises :class:`WarmupError` at the first failed request."""
    import aiohttp

    llm = plan.spec.llm
    assert llm is not None
    rng = random.Random(1)
    requests: list[LLMRequest] = []
    for n in draw_lengths(plan.spec):
        if llm.unit == "tokens":
            requests.append(TokenRequest(max_tokens=llm.max_tokens, stream=False,
                                         token_ids=tuple(rng.randrange(*TOKEN_IDS)
                                                         for _ in range(n))))
        else:
            requests.append(LLMRequest(kind="chat" if llm.endpoint == "chat" else "completion",
                                       prompt=make_prompt(n, rng), max_tokens=llm.max_tokens,
                                       stream=False))

    async def send() -> list[float]:
        out: list[float] = []
        async with aiohttp.ClientSession() as session:
            for i, req in enumerate(requests):
                res = await send_request(session, plan.url, plan.model, req,
                                         plan.spec.timeout_seconds)
                if not res.ok:
                    why = res.error or f"HTTP {res.status}"
                    raise WarmupError(f"model {plan.model}: warm-up request {i + 1} of "
                                      f"{len(requests)} to {plan.url} failed: {why}")
                out.append(res.e2e_s)
        return out

    return asyncio.run(send())


def triton_latencies(plan: Plan) -> list[float]:
    """Send a classic model's warm-up to Triton (HTTP or gRPC, ``tritonclient``); the
    latency of each request (seconds). Raises :class:`WarmupError` when one fails."""
    import numpy as np

    from fleetwatch.clients.triton.unary import Protocol, send_requests

    spec = plan.spec
    assert spec.inputs is not None

    def make(index: int) -> dict[str, Any]:
        batch = [spec.batch_sizes[index % len(spec.batch_sizes)]] if spec.batch_sizes else []
        return {t.name: np.zeros([*batch, *t.shape], dtype=NUMPY_DTYPES[t.datatype])
                for t in spec.inputs or ()}

    protocol: Protocol = "grpc" if spec.protocol == "grpc" else "http"  # openai: llm_latencies
    try:
        result = send_requests(plan.url, plan.model, protocol=protocol,
                               inputs=make, requests=spec.count, concurrency=1,
                               max_duration_s=spec.timeout_seconds * spec.count,
                               model_version=plan.version, timeout_s=spec.timeout_seconds)
    except ValueError as exc:  # a non-loopback address
        raise WarmupInputError(f"model {plan.model}: warmup to {plan.url}: {exc}") from None
    if result.failed or result.succeeded < spec.count:
        why = result.errors[0] if result.errors else "stopped before the end"
        raise WarmupError(f"model {plan.model}: warm-up to {plan.url} ({spec.protocol}): "
                          f"{result.failed} of {spec.count} requests failed: {why}")
    return result.latencies_s


def _ms(xs: list[float]) -> str:
    return ", ".join(f"{1000 * x:.1f}" for x in xs)


def _get_json(url: str, timeout: float) -> tuple[int, Any]:
    """``(HTTP status, JSON body or None)`` of ``GET url``; ``(0, None)`` without an
    answer."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


def check_served(plan: Plan) -> None:
    """Ask the server whether it serves the model (and version) before warming it up:
    vLLM's ``GET /v1/models``, Triton's ``GET /v2/models/<m>[/versions/<v>]/ready``
    (``http`` only: gRPC is not asked). Raises :class:`WarmupInputError` naming what the
    server serves when it does not; a server that does not answer is left to the
    warm-up's own error (exit 1)."""
    timeout = min(plan.spec.timeout_seconds, 10.0)
    base = plan.url.rstrip("/")
    if plan.spec.protocol == "openai":
        status, doc = _get_json(f"{base}/v1/models", timeout)
        if status == 200 and isinstance(doc, dict) and isinstance(doc.get("data"), list):
            served = sorted(str(m.get("id")) for m in doc["data"] if isinstance(m, dict))
            if plan.model not in served:
                raise WarmupInputError(f"model {plan.model}: not served by {plan.url} "
                                       f"(it serves: {', '.join(served) or 'nothing'})")
    elif plan.spec.protocol == "http":
        q = urllib.parse.quote(plan.model, safe="")
        path = f"/v2/models/{q}" + (f"/versions/{urllib.parse.quote(plan.version, safe='')}"
                                    if plan.version else "")
        status, _ = _get_json(f"{_host('http://' + base.split('://')[-1])}{path}/ready",
                              timeout)
        if status not in (0, 200):
            v = f" version {plan.version!r}" if plan.version else ""
            raise WarmupInputError(f"model {plan.model}{v}: not ready or not known on "
                                   f"{plan.url} (GET {path}/ready: HTTP {status})")


def run_warmups(cfg: SidecarConfig, registry: Registry, model: str | None, version: str,
                echo: Callable[[str], None], config_path: str = "") -> list[list[float]]:
    """Run the warm-ups of :func:`plans` in turn, printing one line each with the first
    and last :data:`SHOWN` latencies (milliseconds); returns each one's latencies."""
    out = []
    for plan in plans(cfg, registry, model, version):
        try:
            loopback_address(plan.url)
        except ValueError as exc:
            raise WarmupInputError(f"model {plan.model}: warmup to {plan.url}: {exc} "
                                   "(a warm-up goes to the sidecar's own server)") from None
        check_served(plan)
        t0 = time.perf_counter()
        send = llm_latencies if plan.spec.protocol == "openai" else triton_latencies
        lat = send(plan)
        took = time.perf_counter() - t0
        v = f" version {plan.version!r}" if plan.version else ""
        echo(f"model {plan.model}{v}: warm-up of {len(lat)} requests ({plan.spec.protocol} "
             f"{plan.url}) in {took:.1f} s; first latencies ms: {_ms(lat[:SHOWN])}; last: "
             f"{_ms(lat[-SHOWN:])}")
        out.append(lat)
    return out
