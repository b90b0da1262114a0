"""Test doubles of engines in states no real engine can be put in on demand:

* :class:`FrozenEngineDouble` — a vLLM whose engine core hangs behind a live API server:
  it replays a real capture under load (``tests/fixtures/expositions/vllm/
  v0.32.0-cpu-real-engine-tiny-llm-under-load.prom``: 8 running, 6 waiting). While
  ``frozen`` is False every answer has the request and token counters advanced (an engine
  making progress); once True, every answer repeats the last one: counters still, gauges
  still saying requests run and wait;
* :class:`SlowUpstreamDouble` — an upstream that answers the same capture only after
  ``delay`` seconds (a scrape timeout when ``delay`` exceeds the sidecar's
  ``scrape.timeout_seconds``).

Both are :class:`tests.support.hostile.Upstream` (a threaded loopback HTTP server).
"""

from __future__ import annotations

import threading
import time

from tests.support.helpers import FIXTURES
from tests.support.hostile import Upstream

UNDER_LOAD = FIXTURES / "vllm" / "v0.32.0-cpu-real-engine-tiny-llm-under-load.prom"
#: The counters a moving engine advances at every answer.
_MOVING = ("vllm:request_success_total{", "vllm:generation_tokens_total{",
           "vllm:prompt_tokens_total{")


def advanced(text: str, step: int) -> str:
    """``text`` with each sample of the moving counters raised by ``step``."""
    out = []
    for line in text.splitlines():
        if line.startswith(_MOVING):
            name, value = line.rsplit(" ", 1)
            line = f"{name} {float(value) + step}"
        out.append(line)
    return "\n".join(out) + "\n"


class FrozenEngineDouble(Upstream):
    """Test double: a vLLM engine that moves, then freezes (see the module doc)."""

    def __init__(self) -> None:
        self.capture = UNDER_LOAD.read_text()
        self.frozen = False
        self._lock = threading.Lock()
        self._step = 0
        self._last = advanced(self.capture, 0)
        super().__init__(self._answer)

    def _answer(self, _n: int) -> str:
        with self._lock:
            if not self.frozen:
                self._step += 1
                self._last = advanced(self.capture, self._step)
            return self._last


class SlowUpstreamDouble(Upstream):
    """Test double: the capture under load, answered after ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self._step = 0
        capture = UNDER_LOAD.read_text()

        def answer(_n: int) -> str:
            if self.delay:
                time.sleep(self.delay)
            self._step += 1
            return advanced(capture, self._step)

        super().__init__(answer)
