"""``fleetwatch lint``: the model-configuration lint (:mod:`fleetwatch.governance.lint`)
on the servers a sidecar configuration names, or on a model repository's ``config.pbtxt``.

From ``--config``: each Triton target with an ``api_url`` is asked for its repository
index (``POST /v2/repository/index``; the models in state ``READY``, at most
:data:`MAX_MODELS`), each model's ``GET /v2/models/<m>/config``, and its ``/metrics``
body (whether ``nv_inference_first_response_histogram_ms`` is there); each vLLM or SGLang
target for its models (``GET /v1/models``; only the LLM readiness check applies to them).
Each request is bounded by the configuration's ``scrape.timeout_seconds``. From
``--model-repository``: the ``config.pbtxt`` files (:mod:`fleetwatch.governance.pbtxt`);
whether the server will run with first-response histograms is ``--histogram-latencies``
(unset: not checked).

Exit codes: 0 no finding; 1 findings (one line each on stdout: ``model M: [severity]
check: what to change``) or a server that cannot be read (stderr names the target and
the request); 2 bad input (naming the file and the field).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import click

from fleetwatch.alerts.config import AlertingConfig, AlertingConfigError, load_alerting_config
from fleetwatch.commands.common import EXIT_RUNTIME, fail, registry_or_fail
from fleetwatch.exporters.sources import OPENAI_SERVER_KINDS
from fleetwatch.governance.lint import Finding, ModelFacts, lint, not_ready_allowance
from fleetwatch.governance.pbtxt import ParserMissingError, RepositoryError, read_repository
from fleetwatch.labels.registry import Registry
from fleetwatch.sidecar.config import ConfigError, SidecarConfig, Target, load_config
from fleetwatch.sidecar.config_watch import FIRST_RESPONSE_FAMILY
from fleetwatch.wording import counted

#: Models read at most from one server.
MAX_MODELS = 1000
#: Bytes of one answer read at most (a model configuration, the index, /metrics).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class ServerReadError(RuntimeError):
    """A server that did not answer a request readably; the message names the request."""


def _get(url: str, timeout: float, body: bytes | None = None) -> bytes:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data: bytes = resp.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ServerReadError(f"{req.method} {url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServerReadError(f"{req.method} {url}: {exc}") from None
    if len(data) > MAX_ANSWER_BYTES:
        raise ServerReadError(f"{req.method} {url}: answer larger than {MAX_ANSWER_BYTES} "
                              "bytes")
    return data


def _json(url: str, timeout: float, body: bytes | None = None) -> object:
    try:
        doc: object = json.loads(_get(url, timeout, body))
    except ValueError:
        raise ServerReadError(f"{url}: not JSON") from None
    return doc


def server_facts(target: Target, registry: Registry, timeout: float) -> list[ModelFacts]:
    """The lint inputs of one Triton target (see the module docstring); raises
    :class:`ServerReadError`."""
    assert target.api_url is not None
    base = str(target.api_url).rstrip("/")
    index = _json(f"{base}/v2/repository/index", timeout, b"{}")
    if not isinstance(index, list):
        raise ServerReadError(f"POST {base}/v2/repository/index: not a JSON list")
    names = sorted({str(e["name"]) for e in index if isinstance(e, dict)
                    and e.get("state") == "READY" and "name" in e})[:MAX_MODELS]
    hist = FIRST_RESPONSE_FAMILY.encode() in _get(str(target.url), timeout)
    out = []
    for name in names:
        doc = _json(f"{base}/v2/models/{urllib.parse.quote(name, safe='')}/config", timeout)
        if not isinstance(doc, dict):
            raise ServerReadError(f"GET {base}/v2/models/{name}/config: not a JSON object")
        out.append(ModelFacts(name, doc, registry.lookup(name), hist))
    return out


def engine_facts(target: Target, registry: Registry, timeout: float) -> list[ModelFacts]:
    """The lint inputs of a vLLM or SGLang target: the models its OpenAI-compatible
    ``GET /v1/models`` lists (``data[].id``; on ``api_url``, else the metrics URL's host),
    with the target's kind as their runtime; raises :class:`ServerReadError`."""
    if target.api_url is not None:
        base = str(target.api_url).rstrip("/")
    else:
        parts = urllib.parse.urlsplit(str(target.url))
        base = f"{parts.scheme}://{parts.netloc}"
    doc = _json(f"{base}/v1/models", timeout)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise ServerReadError(f"GET {base}/v1/models: no 'data' list")
    names = sorted({str(m["id"]) for m in data if isinstance(m, dict) and "id" in m})
    return [ModelFacts(n, {}, registry.lookup(n), runtime=target.kind)
            for n in names[:MAX_MODELS]]


def _config_facts(cfg: SidecarConfig, registry: Registry) -> list[ModelFacts]:
    facts: list[ModelFacts] = []
    problems = []
    for t in cfg.targets:
        try:
            if t.kind == "triton" and t.api_url is not None:
                facts += server_facts(t, registry, cfg.scrape.timeout_seconds)
            elif t.kind in OPENAI_SERVER_KINDS:
                facts += engine_facts(t, registry, cfg.scrape.timeout_seconds)
        except ServerReadError as exc:
            problems.append(f"target {t.name}: cannot read its model configurations: {exc}")
    if problems:
        fail("\n".join(problems), code=EXIT_RUNTIME)
    return facts


def _allowance(path: str | None) -> Callable[[str], float]:
    try:
        alerting = load_alerting_config(path) if path else AlertingConfig()
    except AlertingConfigError as exc:
        fail(str(exc))
    return not_ready_allowance(alerting)


@click.command("lint")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Sidecar configuration YAML: lint the Triton targets it names.")
@click.option("--model-repository", "repository", metavar="DIRECTORY",
              help="A Triton model repository: lint its config.pbtxt files.")
@click.option("--registry", "registry_path", type=click.Path(dir_okay=False),
              help="Model registry YAML (default: the one --config names).")
@click.option("--alerting", "alerting_path", type=click.Path(dir_okay=False),
              help="Alerting configuration YAML the rules are generated with (its "
                   "model_not_ready allowances; default: the built-in ones).")
@click.option("--histogram-latencies/--no-histogram-latencies", default=None,
              help="With --model-repository: whether tritonserver runs with "
                   "--metrics-config histogram_latencies=true (unset: not checked).")
def lint_command(config_path: str | None, repository: str | None, registry_path: str | None,
                 alerting_path: str | None, histogram_latencies: bool | None) -> None:
    """Check Triton model configurations for serving pitfalls (docs/governance.md); exit 1
    with one line per finding saying what to change."""
    if (config_path is None) == (repository is None):
        fail("give exactly one of --config and --model-repository")
    allowance = _allowance(alerting_path)
    if config_path is not None:
        try:
            cfg = load_config(config_path)
        except ConfigError as exc:
            fail(str(exc))
        registry = registry_or_fail(registry_path or cfg.registry,
                                    "" if registry_path else f"{config_path}: registry")
        facts = _config_facts(cfg, registry)
    else:
        registry = registry_or_fail(registry_path)
        try:
            models = read_repository(Path(str(repository)))
        except RepositoryError as exc:
            fail(str(exc))
        except ParserMissingError as exc:
            fail(str(exc), code=EXIT_RUNTIME)
        facts = [ModelFacts(m.name, m.config, registry.lookup(m.name), histogram_latencies)
                 for m in models]
    report(lint(facts, allowance), len(facts))


def report(findings: list[Finding], models: int) -> None:
    """Print the findings (stdout) and a summary (stderr); exit 1 when there are any."""
    for f in findings:
        click.echo(f.line())
    click.echo(f"{counted(models, 'model')} checked, {counted(len(findings), 'finding')}",
               err=True)
    if findings:
        raise SystemExit(EXIT_RUNTIME)
