"""The allocator settings a long session relies on (bench/fanout_rss.py measures their effect)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from codewhale.allocator import tune

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


@glibc
def test_glibc_accepts_the_settings() -> None:
    assert tune() is True


@glibc
def test_a_large_freed_buffer_goes_back_to_the_system_after_tuning() -> None:
    # With glibc's default, freeing one mapped block raises the mmap threshold, so the
    # next large buffers come from the heap and stay resident after they are freed.
    probe = (
        "import sys\n"
        "from codewhale.allocator import tune\n"
        "if sys.argv[1] == 'tuned': tune()\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS:'): return int(line.split()[1])\n"
        "del bytearray(4 << 20)[:]\n"  # one mapped block freed: the threshold rises
        "before = rss()\n"
        "blocks = [bytearray(1 << 20) for _ in range(64)]\n"
        "keep = bytearray(100_000)\n"  # from the heap, last: the heap cannot shrink below it
        "del blocks\n"
        "print(rss() - before)\n"
    )

    def kept_kb(mode: str) -> int:
        run = subprocess.run(
            [sys.executable, "-c", probe, mode], capture_output=True, text=True, check=True
        )
        return int(run.stdout)

    assert kept_kb("tuned") < 8 * 1024 < kept_kb("default")
