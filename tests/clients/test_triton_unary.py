"""fleetwatch.clients.triton.unary: what a load run holds after it returns (the real
``tritonclient.http`` and gevent, against a loopback port nothing listens on)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Runs in a fresh interpreter, so that no other test's threads or descriptors (a
#: server's, a pool's winding down) move the counts: 1 round, the counts at rest, 5
#: rounds, then whether the process settles back to them.
ROUNDS = """
import numpy as np
from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.procs import free_ports
from tests.support.helpers import held, held_at_rest, settles_back

address = f"127.0.0.1:{free_ports(1)[0]}"

def round_():
    result = send_requests(address, "m", protocol="http", requests=4, concurrency=4,
                           inputs=lambda i: {"INPUT": np.zeros((1, 4), np.float32)},
                           timeout_s=1.0)
    assert result.failed == 4, result  # nothing listens: each request fails, none hangs

round_()  # imports, the resolver's first use
before = held_at_rest()
for _ in range(5):
    round_()
settles_back(before, "5 rounds of HTTP workers")
print("held", before, held())
"""


def test_rounds_of_http_workers_hold_no_more_descriptors_or_threads() -> None:
    """Each round's workers are new threads; tritonclient.http gives each a gevent hub
    (an epoll, an eventfd and a thread) that would outlive it unless released (5 rounds
    of 4 workers held 20 more of each without it)."""
    done = subprocess.run([sys.executable, "-c", ROUNDS], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("held "), done.stdout
