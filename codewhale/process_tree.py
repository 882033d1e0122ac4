"""The processes below a given one, read from /proc (Linux), and how to end them.

A process group is not enough to find what a command started: `setsid` (or a double
fork) leaves the group, and an orphan is adopted by the nearest subreaper or PID
namespace init. The RLM kernel is made a subreaper and, when sandboxed, lives in its
own PID namespace, so everything it starts stays somewhere below the process we
spawned, and this walk finds it. /proc/<pid>/task/*/children would be cheaper but
needs CONFIG_PROC_CHILDREN, which not every kernel has; the stat files are always there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable

PROC = "/proc"
PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the subreaper of everything it starts (Linux; elsewhere nothing).

    A process whose parent dies is adopted by the nearest subreaper, else by init, where
    `descendants` no longer finds it. Sandboxed commands meet this: a sandbox killed in
    its first milliseconds, before the process inside asked to die with it, leaves that
    process (and the command) orphaned. Adopted by us, they are still found and ended.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _parents() -> dict[int, int]:
    """pid -> parent pid for every live, non-zombie process we can see."""
    parents: dict[int, int] = {}
    with contextlib.suppress(OSError):
        names = os.listdir(PROC)
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open(f"{PROC}/{name}/stat", "rb") as stat:
                    text = stat.read()
            except OSError:  # it exited while we looked
                continue
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            fields = text[text.rfind(b")") + 2 :].split(b" ", 2)
            if fields[0] != b"Z":
                parents[int(name)] = int(fields[1])
    return parents


def descendants(root: int) -> list[int]:
    """Every live process below `root`, parents before their children."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found += below
        frontier += below
    return found


def kill(pids: Iterable[int]) -> None:
    """SIGKILL each of `pids` that is still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_still_ours(pids: Iterable[int]) -> list[int]:
    """SIGKILL those of `pids` still below this process: a command's processes, taken
    before it was stopped, some of which this process may have adopted since. Returns
    those it killed."""
    ours = set(descendants(os.getpid()))
    killed = [pid for pid in pids if pid in ours]
    kill(killed)
    return killed


async def reap(pids: Iterable[int], within_secs: float = 5.0) -> None:
    """Collect the exit of those of `pids` this process adopted, once they have ended.

    A subreaper must: an adopted orphan that exits stays a zombie until its new parent
    waits for it, and nothing else here does (asyncio and subprocess wait only for what
    they started). Only processes that were below a command are passed here, never one
    this process started, so no one else's exit status is taken. Those not ended within
    `within_secs` (or never adopted: their own parent waits for them) are left.
    """
    import asyncio  # not at the top: every start loads this module, asyncio costs it ~25 ms

    pending = set(pids)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_secs
    while pending:
        for pid in list(pending):
            try:
                ended, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child: its own parent collects it
                ended = pid
            if ended:
                pending.discard(pid)
        if not pending or loop.time() >= deadline:
            return
        await asyncio.sleep(0.01)


async def end_group(
    leader: int, ended: Callable[[], Awaitable[object]], grace_secs: float = 0.0
) -> None:
    """End the process group `leader` leads, and what it started that is still ours.

    SIGTERM first when `grace_secs` is given (what is left after it gets SIGKILL), else
    SIGKILL at once; `ended` waits for the leader's end. What was below the leader when
    this began and is still below us after the group is gone is killed too: a sandbox
    stopped in its first milliseconds leaves its inner process (its own session, not
    yet bound to die with it) orphaned, and the app adopts orphans (`adopt_orphans`).
    That happens before the last wait, as asyncio's wait for a process ends only once
    its output pipe closes, and such an orphan would hold it open for good.
    """
    import asyncio  # not at the top, as in reap

    below = set(descendants(leader))
    if grace_secs > 0:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ended(), grace_secs)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, signal.SIGKILL)
    adopted = kill_still_ours(below)
    await ended()
    await reap(adopted)


def kill_below(root: int, keep: Iterable[int] = ()) -> int:
    """SIGKILL everything below `root` except `keep`, until none is left; returns how many.

    Repeated because a process can fork between our look and our kill; three rounds
    end a fork loop in practice, and the caller's sandbox ends anything left.
    """
    kept = set(keep)
    killed: set[int] = set()
    for _ in range(3):
        targets = [pid for pid in descendants(root) if pid not in kept]
        if not targets:
            break
        kill(targets)
        killed.update(targets)
    return len(killed)
