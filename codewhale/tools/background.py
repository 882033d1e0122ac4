"""Background shell tasks: `exec_shell {background: true}` starts a command and answers at
once with its id; `shell_output` reads what it printed since, `shell_kill` stops it.

For dev servers, watchers and long test runs the turn should not wait on. A task runs
in the same sandbox and under the same approval as a blocking command (exec_shell
starts it), in its own process group; every task of the session is stopped when the
session ends. The registry is the session's, shared by the parent and its children;
at most MAX_RUNNING run at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codewhale import process_tree

# Output kept per task (its tail): a dev server may log for hours.
MAX_KEPT_BYTES = 1024 * 1024
MAX_RUNNING = 8
KILL_GRACE_SECS = 2.0
# `shell_output {block: true}` waits at most this long for the task to end.
MAX_BLOCK_MS = 600_000


@dataclass
class BackgroundTask:
    task_id: str
    command: str
    requester: str
    process: asyncio.subprocess.Process
    started: float = field(default_factory=time.monotonic)
    # Output as a list of chunks (joined only when read), and how many bytes were dropped
    # from its start to keep MAX_KEPT_BYTES.
    chunks: list[bytes] = field(default_factory=list)
    kept: int = 0
    dropped: int = 0
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    # When it ended (monotonic, like `started`): the time it ran stops counting there.
    ended_at: float | None = None
    killed: bool = False

    @property
    def total(self) -> int:
        """Bytes printed so far, the dropped ones included: what `since` counts in."""
        return self.dropped + self.kept

    @property
    def exit_code(self) -> int | None:
        return self.process.returncode if self.ended.is_set() else None

    def take(self, block: bytes) -> None:
        self.chunks.append(block)
        self.kept += len(block)
        while self.kept > MAX_KEPT_BYTES and len(self.chunks) > 1:
            first = self.chunks.pop(0)
            self.kept -= len(first)
            self.dropped += len(first)

    def since(self, offset: int) -> tuple[str, int]:
        """(what was printed after byte `offset`, as far as it is kept; the new offset)."""
        data = b"".join(self.chunks)
        start = max(offset - self.dropped, 0)
        return data[start:].decode("utf-8", errors="replace"), self.total

    def status(self) -> str:
        if not self.ended.is_set():
            return f"running for {time.monotonic() - self.started:.0f} s"
        how = "killed" if self.killed else "exited"
        return f"{how} with code {self.process.returncode}"


def exit_note(task: BackgroundTask) -> str:
    """The runtime event that tells the conversation a task of its ended by itself."""
    tail, _ = task.since(max(task.total - 400, 0))
    return (
        '<codewhale:runtime_event kind="background_task_exit">\n'
        f"Background task {task.task_id} ({task.command[:120]}) {task.status()}. "
        f"Its last output:\n{tail.strip()}\n"
        "</codewhale:runtime_event>"
    )


class BackgroundTasks:
    """The session's background tasks; `on_exit` hears of each one that ends by itself."""

    def __init__(self) -> None:
        self._tasks: dict[str, BackgroundTask] = {}
        self._ids = itertools.count(1)
        self._readers: set[asyncio.Task[None]] = set()
        self.on_exit: Callable[[BackgroundTask], Any] | None = None
        # Hears of every task that starts or ends (killed too): front ends show them.
        self.on_change: Callable[[BackgroundTask], Any] | None = None

    def running(self) -> list[BackgroundTask]:
        return [task for task in self._tasks.values() if not task.ended.is_set()]

    def all(self) -> list[BackgroundTask]:
        """Every task of the session, ended ones too, in the order started."""
        return list(self._tasks.values())

    def get(self, task_id: str) -> BackgroundTask | None:
        return self._tasks.get(task_id)

    def room(self) -> str | None:
        """Why no task may start now (None: one may)."""
        if len(self.running()) >= MAX_RUNNING:
            return (
                f"{MAX_RUNNING} background tasks are already running; stop one with "
                "shell_kill or wait for one to end"
            )
        return None

    def add(self, command: str, requester: str, process: asyncio.subprocess.Process) -> str:
        """Adopt a started process (stdout and stderr merged on one pipe); its id."""
        task = BackgroundTask(f"bg_{next(self._ids)}", command, requester, process)
        self._tasks[task.task_id] = task
        reader = asyncio.get_running_loop().create_task(self._follow(task))
        self._readers.add(reader)
        reader.add_done_callback(self._readers.discard)
        if self.on_change is not None:
            self.on_change(task)
        return task.task_id

    async def _follow(self, task: BackgroundTask) -> None:
        reading = asyncio.ensure_future(self._read(task))
        try:
            await task.process.wait()
            # What the command left running in its group would hold the pipe open: it
            # ends with the command, as exec_shell's do, once its last output is read.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(task.process.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reading), 1.0)
        finally:
            reading.cancel()
            task.ended_at = time.monotonic()
            task.ended.set()
        if self.on_change is not None:
            self.on_change(task)
        if not task.killed and self.on_exit is not None:
            self.on_exit(task)

    @staticmethod
    async def _read(task: BackgroundTask) -> None:
        assert task.process.stdout is not None
        while block := await task.process.stdout.read(65536):
            task.take(block)

    async def kill(self, task: BackgroundTask) -> None:
        """SIGTERM its process group, SIGKILL after a grace period; wait for its end."""
        if task.ended.is_set():
            return
        task.killed = True
        await process_tree.end_group(task.process.pid, task.ended.wait, KILL_GRACE_SECS)

    async def close(self) -> None:
        """Stop every task still running (the session ends)."""
        await asyncio.gather(*(self.kill(task) for task in self.running()))
