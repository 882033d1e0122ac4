"""How the C allocator hands memory back, tuned for a long session (glibc; elsewhere nothing).

A session's transient buffers are large: each request body holds the whole conversation,
each state snapshot every record, and the snapshots are encoded in worker threads. With
glibc's defaults those threads get their own 64 MB arenas, and a freed large buffer
raises the mmap threshold, so the next ones come from the heap and leave holes that the
resident size keeps. Measured (bench/fanout_rss.py, 40 rounds of 20 children): the
resident size grew 30-34 KB a child with the defaults against 12 KB of live Python
objects, and 20 KB with these settings.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# Blocks from this size up are mapped on their own and unmapped when freed (glibc's
# starting value, kept fixed instead of rising after each free).
MMAP_THRESHOLD = 128 * 1024
# Arenas for all threads: the loop's and the few that write files or run git.
ARENA_MAX = 2


def tune() -> bool:
    """Apply the settings above to this process; False where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this interpreter runs on
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENA_MAX))
