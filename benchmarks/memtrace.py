"""Where a process's memory goes over time: a debug hook for benchmarks, never for ``src/``.

    FLEETWATCH_MEMTRACE=DIR FLEETWATCH_MEMTRACE_EVERY=60 python -c \\
        "import memtrace; memtrace.start_from_env(); ..."

:func:`start_from_env` does nothing unless ``FLEETWATCH_MEMTRACE`` names a folder. Then it
starts :mod:`tracemalloc` (``FLEETWATCH_MEMTRACE_FRAMES`` frames, 4 by default) and a
daemon thread that every ``FLEETWATCH_MEMTRACE_EVERY`` seconds writes, into that folder:

* ``snap-<seconds>.tracemalloc``: a :class:`tracemalloc.Snapshot` (``Snapshot.load``);
* one line of ``rows.jsonl``: seconds since start, RSS (``/proc/self/status``, bytes),
  what tracemalloc traces (bytes), glibc's ``mallinfo2`` (``arena``: bytes of the main
  heap, ``uordblks``: in use, ``fordblks``: free in it, ``hblkhd``: mmapped blocks), the
  collector's tracked objects by type (the 40 commonest) and its per-generation counts.

RSS growing while the traced bytes stay flat is the allocators keeping memory (pymalloc
arenas that still hold a live object, glibc's free lists), not a structure that grows.
:func:`diff` prints what grew between two snapshots, by allocation site.

    python benchmarks/memtrace.py DIR [--first N] [--last N] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import json
import os
import threading
import time
import tracemalloc
from pathlib import Path


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _mallinfo() -> dict[str, int]:
    """glibc's ``mallinfo2()`` fields that say where malloc's memory is (empty elsewhere)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = _MallInfo2
    got = fn()
    return {k: int(getattr(got, k)) for k in ("arena", "uordblks", "fordblks", "hblkhd")}


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _row(t: float) -> dict[str, object]:
    types = collections.Counter(type(o).__name__ for o in gc.get_objects())
    return {"t": round(t, 1), "rss": _rss(), "traced": tracemalloc.get_traced_memory()[0],
            "malloc": _mallinfo(), "gc_counts": gc.get_count(),
            "objects": sum(types.values()), "types": dict(types.most_common(40))}


def _loop(folder: Path, every: float) -> None:
    t0 = time.monotonic()
    while True:
        time.sleep(every)
        t = time.monotonic() - t0
        tracemalloc.take_snapshot().dump(str(folder / f"snap-{t:06.0f}.tracemalloc"))
        with (folder / "rows.jsonl").open("a") as f:
            f.write(json.dumps(_row(t)) + "\n")


def start_from_env() -> None:
    """Start tracing when ``FLEETWATCH_MEMTRACE`` is set (see the module docstring)."""
    where = os.environ.get("FLEETWATCH_MEMTRACE")
    if not where:
        return
    folder = Path(where)
    folder.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(int(os.environ.get("FLEETWATCH_MEMTRACE_FRAMES", "4")))
    every = float(os.environ.get("FLEETWATCH_MEMTRACE_EVERY", "60"))
    threading.Thread(target=_loop, args=(folder, every), name="memtrace", daemon=True).start()


def diff(folder: Path, first: int, last: int, top: int) -> None:
    """Print the RSS/traced rows, then the ``top`` allocation sites that grew most between
    the ``first``-th and the ``last``-th snapshot of ``folder`` (0-based, negative from the
    end)."""
    for line in (folder / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        m = r["malloc"]
        print(f"t {r['t']:7.0f} s  RSS {r['rss'] / 2**20:7.1f} MB  traced "
              f"{r['traced'] / 2**20:7.1f} MB  malloc arena {m.get('arena', 0) / 2**20:6.1f} "
              f"in use {m.get('uordblks', 0) / 2**20:6.1f} free {m.get('fordblks', 0) / 2**20:6.1f}"
              f" mmap {m.get('hblkhd', 0) / 2**20:6.1f} MB  objects {r['objects']}")
    snaps = sorted(folder.glob("snap-*.tracemalloc"))
    a, b = snaps[first], snaps[last]
    print(f"\n{a.name} → {b.name}")
    old, new = tracemalloc.Snapshot.load(str(a)), tracemalloc.Snapshot.load(str(b))
    for stat in new.compare_to(old, "traceback")[:top]:
        print(f"{stat.size_diff / 2**20:+8.2f} MB {stat.count_diff:+8d} blocks "
              f"(now {stat.size / 2**20:.2f} MB)")
        for frame in stat.traceback.format()[-8:]:
            print("    " + frame.strip())
    rows = [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines()]
    ta, tb = rows[first]["types"], rows[last]["types"]
    grew = sorted(((tb.get(k, 0) - ta.get(k, 0), k) for k in tb), reverse=True)[:15]
    print("\nobjects by type, growth:", ", ".join(f"{k} {d:+d}" for d, k in grew))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--last", type=int, default=-1)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    diff(a.folder, a.first, a.last, a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
