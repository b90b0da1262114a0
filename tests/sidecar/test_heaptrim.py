"""The heap trimmer's rate limit and free-space threshold, on this process's real C library
(glibc on the Linux machines the suite runs on), and its no-op elsewhere."""

from __future__ import annotations

import os
import platform
import sys

import pytest

from fleetwatch.sidecar.heaptrim import HeapTrimmer, glibc

on_glibc = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's; the no-op test covers other C libraries")


@on_glibc
def test_trims_at_most_once_per_interval() -> None:
    heap = HeapTrimmer.load()
    heap.interval, heap.min_free_bytes = 10.0, 0
    assert heap.due(100.0)
    assert heap.trim()
    assert not heap.due(100.0)
    assert not heap.due(109.9)  # within the interval of the last slot
    assert heap.due(110.0)
    assert heap.trim()
    assert not heap.due(115.0)
    assert heap.trims == 2
    assert heap.trim_seconds > 0


@on_glibc
def test_skips_a_trim_when_little_is_free() -> None:
    heap = HeapTrimmer.load()
    free = heap.free_bytes()
    assert free is not None and free >= 0
    heap.min_free_bytes = free + 2**40  # more than any heap here holds free
    assert heap.due(0.0)
    assert not heap.trim()
    assert heap.trims == 0
    assert not heap.due(1.0)  # the skipped trim still took its slot


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@on_glibc
def test_a_trim_returns_freed_pages_to_the_system() -> None:
    """Memory freed in the middle of the heap (a survivor above it keeps the heap's top in
    use, so free() itself returns nothing) leaves RSS when trimmed."""
    heap = HeapTrimmer.load()
    heap.min_free_bytes = 0
    blocks = [bytearray(b"x" * (64 * 1024)) for _ in range(800)]  # 50 MiB, touched
    keep = blocks[-1]
    del blocks
    before = _rss_bytes()
    assert heap.due(0.0) and heap.trim()
    assert before - _rss_bytes() > 25 * 2**20
    assert len(keep) == 64 * 1024


def test_without_glibc_nothing_is_due_nor_trimmed() -> None:
    heap = HeapTrimmer(None, interval=0.0, min_free_bytes=0)
    assert not heap.due(0.0)
    assert not heap.trim()
    assert heap.free_bytes() is None
    assert heap.trims == 0


def test_glibc_is_found_where_the_platform_says_so() -> None:
    expected = sys.platform == "linux" and platform.libc_ver()[0] == "glibc"
    assert (glibc() is not None) == expected
