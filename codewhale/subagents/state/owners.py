"""Which process owns a record or a journal, and whether that process still runs.

A pid alone is not enough: after the owner exits (or the machine reboots) another
process may get its number, and its records would stay "running" for ever. So an
owner is also named by a start token, the boot id and the process's start time in
clock ticks since boot (Linux /proc); where that is unreadable the pid alone decides.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    """A process as records and journals name it."""

    pid: int
    start: str | None

    def to_json(self) -> dict[str, int | str | None]:
        return {"owner_pid": self.pid, "owner_start": self.start}


def start_token(pid: int) -> str | None:
    """`<boot id>:<start time>` of a running process; None where /proc cannot say."""
    boot = _boot_id()
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    fields = stat.rpartition(")")[2].split()
    if boot is None or len(fields) < 20:
        return None
    return f"{boot}:{fields[19]}"


def this_process() -> Owner:
    return _owner(os.getpid())


@cache
def _owner(pid: int) -> Owner:
    # By pid, so a forked process is not taken for its parent.
    return Owner(pid, start_token(pid))


def owner_alive(pid: object, start: object) -> bool:
    """Whether the process `pid` that started at `start` (None: unknown) still runs."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if (pid, start) == (this_process().pid, this_process().start):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    if not isinstance(start, str):
        return True
    current = start_token(pid)
    # Unreadable now (it just exited, or /proc is hidden): trust the pid.
    return current is None or current == start


@cache
def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None
