"""Shadow traffic and rollout steps on a real Triton behind a real nginx mirror, with the
real sidecar and a real Prometheus.

One tritonserver serves ``slo_sim`` versions 1 (8 ms service time), 2 (50 ms: slower) and
3 (a copy of version 1), one instance each. Clients send their requests to nginx, which
proxies ``/v2/models/slo_sim/versions/1/infer`` to Triton and mirrors each of them to
versions 2 and 3 (nginx ``mirror``: the copies' responses are discarded) — the set-up
docs/governance.md shows. The sidecar scrapes Triton every second and Prometheus scrapes
the sidecar. Expected:

* ``compare --shadow`` gives the verdicts of the plain ``compare`` (3: ``same``, 2:
  ``worse``) and the mirror's coverage: every request the baseline served was mirrored;
* ``rollout status --shadow``: step ``shadow``; the gate to ``canary`` passes for version
  3 (exit 0) and is blocked for version 2, naming the worse band (exit 1), and for
  version 3 when the memory plan of both versions does not fit its GPU; without
  ``--shadow`` the same traffic reads as a canary with half the requests (a mirror and a
  real share look alike to Prometheus: the docs say so).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.demo.load import step_load
from fleetwatch.demo.load.inputs import slo_sim_inputs
from fleetwatch.demo.procs import free_ports
from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY, TritonServer
from fleetwatch.labels.registry import parse_registry
from fleetwatch.sidecar.config import parse_config
from fleetwatch.slo.spec import parse_slo_file
from tests.e2e.test_dashboards_prometheus import SidecarThread
from tests.support.helpers import PrometheusProcess, wait_until

pytestmark = pytest.mark.triton

SLOS = {
    "windows": [{"long": "30s", "short": "6s", "budget_consumed": 0.05}],
    "capacity": {"window": "2m", "min_events": 100, "hysteresis_updates": 2},
    "slos": [{
        "name": "sim-latency", "selector": {"models": ["slo_sim"]},
        "sli": {"latency": {"metric": "request", "threshold_seconds": 0.04}},
        "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
        "concurrency": {"envelope": 4, "bands": [1, 2, 4, 8, 16]},
    }],
}
REGISTRY = {"models": [{"name": "slo_sim", "team": "ml", "owner": "a@example.com",
                        "oncall": "ml-oncall"}]}
SECONDS_OF_LOAD = 15.0
PAUSE_SECONDS = 0.08

NGINX_CONF = """\
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {tmp}/nginx-access.log;
  client_body_temp_path {tmp}/nginx-body;
  proxy_temp_path {tmp}/nginx-proxy;
  fastcgi_temp_path {tmp}/nginx-fastcgi;
  uwsgi_temp_path {tmp}/nginx-uwsgi;
  scgi_temp_path {tmp}/nginx-scgi;
  upstream triton {{ server {triton}; keepalive 8; }}
  server {{
    listen 127.0.0.1:{port};
    # a request's mirrors must complete before nginx reads the next request of the same
    # connection: without keep-alive a slow candidate cannot delay the baseline's clients
    keepalive_timeout 0;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location = /v2/models/slo_sim/versions/1/infer {{
      mirror /mirror/2;
      mirror /mirror/3;
      proxy_pass http://triton;
    }}
    location = /mirror/3 {{
      internal;
      proxy_pass http://triton/v2/models/slo_sim/versions/3/infer;
    }}
    location = /mirror/2 {{
      internal;
      proxy_pass http://triton/v2/models/slo_sim/versions/2/infer;
    }}
    location / {{ proxy_pass http://triton; }}
  }}
}}
"""


def _repository(tmp: Path) -> Path:
    repo = tmp / "models"
    shutil.copytree(DEFAULT_MODEL_REPOSITORY / "slo_sim", repo / "slo_sim")
    shutil.copytree(repo / "slo_sim" / "1", repo / "slo_sim" / "3")
    return repo


class Nginx:
    """A real nginx (Debian's) in the foreground on a free loopback port."""

    def __init__(self, tmp: Path, triton: str) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            pytest.fail("nginx not found: apt-get install nginx-light", pytrace=False)
        self.port = free_ports(1)[0]
        self.conf = tmp / "nginx.conf"
        self.conf.write_text(NGINX_CONF.format(tmp=tmp, triton=triton, port=self.port))
        self.tmp = tmp
        self.proc = subprocess.Popen([binary, "-c", str(self.conf), "-p", str(tmp)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Nginx:
        import socket

        def listening() -> bool:
            if self.proc.poll() is not None:
                pytest.fail("nginx exited: " + (self.tmp / "nginx-error.log").read_text()
                            if (self.tmp / "nginx-error.log").exists() else "nginx exited")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0
        wait_until(listening, "nginx listening", 30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _plan_config(tmp: Path, name: str, gpu_gib: int) -> Path:
    """A sidecar configuration whose placement puts slo_sim version 1 (3 GiB a version,
    the registry says) on one GPU of ``gpu_gib`` GiB: both versions fit in 8, not in 4."""
    (tmp / "plan-models.yaml").write_text(yaml.safe_dump({"models": [
        {**REGISTRY["models"][0], "gpu_memory_bytes": 3 << 30}]}))
    path = tmp / f"plan-{name}.yaml"
    path.write_text(yaml.safe_dump({
        "registry": "plan-models.yaml",
        "targets": [{"name": "triton", "kind": "triton", "url": "http://127.0.0.1:1/metrics"}],
        "placement": [{"gpu_uuid": "GPU-0", "memory_bytes": gpu_gib << 30,
                       "models": [{"model": "slo_sim", "model_version": "1"}]}]}))
    return path


def _paced(index: int) -> dict[str, Any]:
    """slo_sim's inputs after a pause: about 10 requests a second from the one client, which
    version 2 (50 ms a request) keeps up with. A mirror has no back-pressure: copies that
    arrive faster than the candidate serves them queue (in the candidate, in the proxy's
    connections), and the candidate's bands fill with a concurrency the baseline never
    saw."""
    time.sleep(PAUSE_SECONDS)
    return slo_sim_inputs(index)


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout + res.stderr


@pytest.fixture(scope="module")
def shadow(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("shadow")
    slos = tmp / "slos.yaml"
    slos.write_text(yaml.safe_dump(SLOS))
    out: dict[str, object] = {}
    with TritonServer(models=["slo_sim"], model_repository=_repository(tmp)) as triton:
        cfg = {"listen": {"address": "127.0.0.1", "port": 0},
               "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
               "targets": [{"name": "triton", "kind": "triton", "url": triton.metrics_url,
                            "api_url": triton.http_url, "models": ["slo_sim"]}]}
        sidecar = SidecarThread(parse_config(cfg), parse_registry(REGISTRY),
                                parse_slo_file(SLOS)).start()
        try:
            with PrometheusProcess([f"127.0.0.1:{sidecar.port}"]) as prom, \
                    Nginx(tmp, triton.http_address) as nginx:
                step_load(nginx.address, "slo_sim", steps=(1,), inputs=_paced,
                          seconds_per_step=SECONDS_OF_LOAD, model_version="1")
                time.sleep(2.5)  # the last interval reaches the sidecar, then Prometheus
                live = ("--prometheus", prom.url, "--slos", str(slos), "--model", "slo_sim")
                status = ("rollout", "status", "--prometheus", prom.url, "--slos", str(slos),
                          "--model", "slo_sim", "--range", "5m", "--baseline-version", "1")
                for cand in ("2", "3"):
                    args = (*live, "--baseline-version", "1", "--candidate-version", cand,
                            "--json")
                    out[("compare", cand)] = _cli("compare", *args)
                    out[("shadow", cand)] = _cli("compare", *args, "--shadow")
                    out[("status", cand)] = _cli(*status, "--candidate-version", cand,
                                                 "--shadow")
                out["text"] = _cli("compare", *live, "--baseline-version", "1",
                                   "--candidate-version", "3", "--shadow")
                out["canary"] = _cli(*status, "--candidate-version", "3", "--json")
                out["unknown"] = _cli(*status, "--candidate-version", "9")
                for name, gib in (("fits", 8), ("tight", 4)):
                    out[name] = _cli(*status, "--candidate-version", "3", "--shadow",
                                     "--config", str(_plan_config(tmp, name, gib)))
                out["access"] = (tmp / "nginx-access.log").read_text()
        finally:
            sidecar.stop()
    return out


def _json(result: object) -> dict[str, object]:
    code, text = result  # type: ignore[misc]
    assert code == 0, text
    return json.loads(text)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("cand", "verdict"), [("3", "same"), ("2", "worse")])
def test_shadow_compare_gives_the_plain_verdicts_and_full_coverage(shadow, cand, verdict):
    plain, mirrored = _json(shadow[("compare", cand)]), _json(shadow[("shadow", cand)])
    cov = mirrored.pop("shadow")
    print({b["band"]: (b["verdict"], b["baseline"] and b["baseline"]["total"], b["baseline"] and b["baseline"]["good"], b["candidate"] and b["candidate"]["total"], b["candidate"] and b["candidate"]["good"]) for b in plain["slos"][0]["bands"]})
    assert mirrored == plain
    assert plain["verdict"] == verdict, plain
    (c,) = cov
    print(cand, c)
    assert c["slo"] == "sim-latency" and c["baseline_events"] >= 30
    # every request nginx proxied to version 1 was mirrored to the candidate
    assert c["coverage"] == pytest.approx(1.0, abs=0.1)


def test_the_mirror_is_in_nginxs_log_and_the_text_says_shadow(shadow):
    infer = [line for line in shadow["access"].splitlines() if "/versions/1/infer" in line]
    assert len(infer) >= 30  # clients reached Triton through nginx
    code, text = shadow["text"]
    print(text)
    assert code == 0
    assert "shadow: the candidate served a mirrored copy" in text
    assert re.search(r"sim-latency: \d+ mirrored events against \d+ served: coverage "
                     r"(9\d|10\d)%", text), text


def test_rollout_status_in_shadow_gates_on_the_comparison(shadow):
    code, text = shadow[("status", "3")]
    print(text)
    assert code == 0, text
    assert "step shadow" in text and "gate to canary: passes" in text
    assert "comparison: same (sim-latency band 1)" in text
    code, text = shadow[("status", "2")]
    print(text)
    assert code == 1
    assert "gate to canary: BLOCKED" in text and "comparison: worse (sim-latency band 1)" in text


def test_the_gate_needs_the_memory_plan_to_fit(shadow):
    code, text = shadow["fits"]
    assert code == 0, text
    assert "memory plan: fits" in text and "gate to canary: passes" in text
    code, text = shadow["tight"]
    assert code == 1, text
    assert "memory plan: does NOT fit" in text and "gate to canary: BLOCKED" in text


def test_without_shadow_the_mirror_reads_as_a_canary_of_half(shadow):
    r = _json(shadow["canary"])
    assert r["step"] == "canary" and r["next"] == "full"
    assert r["share"] == pytest.approx(0.5, abs=0.1)


def test_an_unknown_candidate_is_bad_input_naming_the_versions_seen(shadow):
    code, text = shadow["unknown"]
    assert code == 2
    assert "version '9' has no series" in text and "versions seen over 5m: 1, 2, 3" in text
