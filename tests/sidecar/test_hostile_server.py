"""The sidecar's own HTTP server under hostile clients: slowloris, connection floods,
file-descriptor exhaustion, SIGHUP, concurrent scrapers. Driven against a real
``fleetwatch serve`` process over loopback."""

from __future__ import annotations

import signal
import socket
import threading
import time

from tests.support.hostile import Sidecar, Upstream

BODY = ('# TYPE nv_inference_count counter\n'
        'nv_inference_count{model="m",version="1"} 3\n')


def _config(url: str, **listen: object) -> dict:
    return {"listen": listen, "scrape": {"interval_seconds": 0.3, "timeout_seconds": 0.3},
            "targets": [{"name": "t", "kind": "triton", "url": url}]}


def _closed_within(s: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``s`` within ``seconds``."""
    s.settimeout(seconds)
    try:
        return s.recv(100) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_slowloris_connections_are_closed_and_healthz_keeps_answering():
    with Upstream(lambda _n: BODY) as up, Sidecar(
            _config(up.url, header_timeout_seconds=1.0)) as sc:
        slow = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", sc.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line
            slow.append(s)
        status, _b, _seconds = sc.get("/healthz")
        assert status == 200
        # bounded, generously: the metric below says the header timeout closed them
        assert all(_closed_within(s, 30.0) for s in slow)
        for s in slow:
            s.close()
        assert sc.metric("fleetwatch_http_connections_closed_total",
                         reason="header_timeout") >= 20


def test_connection_flood_and_fd_exhaustion_do_not_stop_scrapes_nor_flood_the_log():
    # 400 descriptors in all, a cap of 1000 asked: the sidecar lowers its cap so that
    # the scrapes keep their descriptors, and says so once
    with Upstream(lambda _n: BODY) as up, Sidecar(
            _config(up.url, max_connections=1000, header_timeout_seconds=5.0),
            max_fds=400) as sc:
        flood = []
        for _ in range(500):
            try:
                flood.append(socket.create_connection(("127.0.0.1", sc.port), timeout=2))
            except OSError:
                break
        time.sleep(1.0)
        up.wait_requests(up.requests + 2, timeout=30)  # the upstream scrapes go on
        for s in flood:
            s.close()
        status, _b, _s = sc.get("/healthz")
        assert status == 200
        sc.wait_metric("fleetwatch_upstream_up", 1, target="t")
        assert sc.metric("fleetwatch_http_connections_closed_total",
                         reason="max_connections") > 0
        log = sc.log()
        assert "Traceback" not in log
        assert len(log.splitlines()) < 30, log[-3000:]
        assert "Too many open files" not in log
        assert "does not fit the file-descriptor limit" in log


def test_sighup_is_ignored_with_a_log_line():
    with Upstream(lambda _n: BODY) as up, Sidecar(_config(up.url)) as sc:
        assert sc.proc is not None
        sc.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert sc.alive()
        assert sc.get("/healthz")[0] == 200
        assert "SIGHUP ignored" in sc.log()


def test_healthz_answers_while_16_clients_scrape_metrics():
    body = "# TYPE nv_inference_count counter\n" + "".join(
        f'nv_inference_count{{model="m{i}",version="1"}} {i}\n' for i in range(1000))
    with Upstream(lambda _n: body) as up, Sidecar(_config(up.url)) as sc:
        up.wait_requests(2)
        stop = threading.Event()
        errors: list[str] = []

        def scrape() -> None:
            while not stop.is_set():
                status, _b, _s = sc.get("/metrics")
                if status != 200:
                    errors.append(str(status))

        threads = [threading.Thread(target=scrape) for _ in range(16)]
        for t in threads:
            t.start()
        for _ in range(10):  # each within get's timeout: not queued behind the scrapers
            status, _b, _seconds = sc.get("/healthz")
            assert status == 200
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join()
        assert not errors
