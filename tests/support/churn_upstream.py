"""A test double of an upstream whose model names churn: every scrape a new set.

No real engine renames hundreds of models a second; an upstream that puts a request id,
a user or a LoRA adapter into the model label does, and the sidecar must stay bounded and
responsive against it. :class:`ChurnUpstreamDouble` serves, at each ``GET /metrics``, a
Triton-format exposition of ``names`` models none of which was in an earlier answer:
request counts, request and queue durations (cumulative microseconds) and the pending
requests gauge, so that each model is decoded, accounted and given a concurrency.
"""

from __future__ import annotations

import http.server
import threading


def churn_exposition(n: int, names: int) -> str:
    """The ``n``-th answer: ``names`` models ``churn{n}_{i}``, every value derived from
    ``n`` and ``i``."""
    models = [f"churn{n}_{i}" for i in range(names)]
    out = ["# TYPE nv_inference_request_success counter\n"]
    out += [f'nv_inference_request_success{{model="{m}",version="1"}} {10 + i}\n'
            for i, m in enumerate(models)]
    out.append("# TYPE nv_inference_count counter\n")
    out += [f'nv_inference_count{{model="{m}",version="1"}} {10 + i}\n'
            for i, m in enumerate(models)]
    out.append("# TYPE nv_inference_request_duration_us counter\n")
    out += [f'nv_inference_request_duration_us{{model="{m}",version="1"}} {5000 * (i + 1)}\n'
            for i, m in enumerate(models)]
    out.append("# TYPE nv_inference_queue_duration_us counter\n")
    out += [f'nv_inference_queue_duration_us{{model="{m}",version="1"}} {100 * (i + 1)}\n'
            for i, m in enumerate(models)]
    out.append("# TYPE nv_inference_pending_request_count gauge\n")
    out += [f'nv_inference_pending_request_count{{model="{m}",version="1"}} {i % 4}\n'
            for i, m in enumerate(models)]
    return "".join(out)


class ChurnUpstreamDouble:
    """An HTTP upstream on loopback serving :func:`churn_exposition` of its answer count
    (``served``) at ``url``; :meth:`stop` shuts it down."""

    def __init__(self, names: int) -> None:
        self.served = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = churn_exposition(outer.served, names).encode()
                outer.served += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
