"""The review app as a library leaves its host process's allocator alone (issue 33).

glibc has no getter for ``M_MMAP_THRESHOLD``, so the check watches what it does: by default the
threshold rises to the size of a mapped block once that block is freed, so a later 4 MiB
allocation comes from the heap; with a fixed 1 MiB threshold (``mallopt``) it is mapped again.
``mallinfo2().hblks`` (the number of mapped blocks) tells the two apart.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need_module

SRC = Path(__file__).resolve().parents[2] / "src"

PROBE = r"""
import ctypes, sys
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "cache":
    from vhd.serve.thumbs import PreviewCache
    PreviewCache(None)
elif sys.argv[1] == "app":
    from vhd.serve.thumbs import map_large_allocations
    map_large_allocations()
libc.free(libc.malloc(8 << 20))  # mapped (above the 128 KiB start); freeing it raises a dynamic threshold
before = libc.mallinfo2().hblks
block = libc.malloc(4 << 20)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


def _mapped_blocks(mode: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(SRC), "MALLOC_MMAP_THRESHOLD_": "", "MALLOC_ARENA_MAX": ""}
    env = {k: v for k, v in env.items() if v != ""}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_building_the_preview_cache_leaves_the_mmap_threshold_alone() -> None:
    need_module("PIL", "pip install pillow")
    try:
        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018
    except (OSError, AttributeError):
        pytest.skip("needs glibc >= 2.33 (mallinfo2)")
    assert _mapped_blocks("app") >= 1, "the probe no longer sees a fixed threshold; the test checks nothing"
    assert _mapped_blocks("none") == 0
    assert _mapped_blocks("cache") == 0, "building PreviewCache changed the process's M_MMAP_THRESHOLD"
