"""Finding processes on the host by a marker in their command line, to prove they ended."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from pathlib import Path


def running(marker: str) -> bool:
    """Whether a live (not zombie) process on the host has `marker` in its command line."""
    return count_running(marker) > 0


def count_running(marker: str) -> int:
    """How many live (not zombie) processes on the host have `marker` in their command line."""
    found = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command_line = (proc / "cmdline").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # it exited while we looked
            continue
        if marker in command_line and state != "Z":
            found += 1
    return found


def kill_marked(marker: str) -> None:
    """SIGKILL every live process with `marker` in its command line: a failed test's
    leftovers, which would otherwise outlive the run."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                os.kill(int(proc.name), signal.SIGKILL)


def daemon_marker() -> str:
    """A unique sleep length, which finds our daemon among the host's processes."""
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


async def gone(marker: str, within: float = 60.0) -> bool:
    """Whether every process with `marker` has ended within `within` seconds (a ceiling,
    generous for a loaded machine: the wait ends as soon as they have)."""
    deadline = time.monotonic() + within
    while running(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not running(marker)
