"""What a front end sees of the session's background shell tasks: immutable snapshots
and output read by offset, never the live task or its process."""

from __future__ import annotations

import time
from dataclasses import dataclass

from codewhale.tools.background import BackgroundTask

# How much of a task's output's end is searched for its last line.
LAST_LINE_WINDOW = 4096


@dataclass(frozen=True)
class TaskSnapshot:
    """One background task as it was when read."""

    task_id: str
    command: str
    # The session id of who started it: the parent's, or `agent:<id>` for a child.
    requester: str
    # How long it has run (until its end, once ended), in milliseconds.
    elapsed_ms: int
    exit_code: int | None
    killed: bool
    # Its last non-blank line of output so far ("" before any).
    last_line: str

    @property
    def running(self) -> bool:
        return self.exit_code is None

    @property
    def status(self) -> str:
        """`running`, `killed` or `exit N`: what the row and the screen say of its state."""
        if self.running:
            return "running"
        return "killed" if self.killed else f"exit {self.exit_code}"


@dataclass(frozen=True)
class TaskOutput:
    """What a task printed after an offset, and the offset to read on from."""

    text: str
    offset: int
    snapshot: TaskSnapshot


def snapshot_of(task: BackgroundTask) -> TaskSnapshot:
    end = task.ended_at if task.ended_at is not None else time.monotonic()
    lines = [line for line in _tail(task).splitlines() if line.strip()]
    return TaskSnapshot(
        task_id=task.task_id,
        command=task.command,
        requester=task.requester,
        elapsed_ms=int((end - task.started) * 1000),
        exit_code=task.exit_code,
        killed=task.killed,
        last_line=lines[-1] if lines else "",
    )


def _tail(task: BackgroundTask) -> str:
    """The end of its output, from its last chunks only: read once a second while it runs,
    and a chatty task keeps a MiB."""
    taken: list[bytes] = []
    size = 0
    for chunk in reversed(task.chunks):
        taken.append(chunk)
        size += len(chunk)
        if size >= LAST_LINE_WINDOW:
            break
    return b"".join(reversed(taken))[-LAST_LINE_WINDOW:].decode("utf-8", errors="replace")


def output_of(task: BackgroundTask, since: int) -> TaskOutput:
    text, offset = task.since(max(since, 0))
    return TaskOutput(text, offset, snapshot_of(task))
