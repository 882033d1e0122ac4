"""Appending a conversation to its session file, by the one process that owns it.

Lines wait in memory and are written at the engine's checkpoints (record_messages,
which it calls before every request and after every round of tool results), and
fsynced at turn boundaries (sync). A crash of the process loses at most the lines
since the last checkpoint (events, a clear); a crash of the machine, at most those
since the last turn boundary.

The writer holds an exclusive lock on the file (flock, where the OS has it) for as
long as it is open, so a second process cannot interleave its lines with ours: the
store forks instead. A write the disk refuses (full, read-only, over a size limit) is
never raised into the turn: the file is cut back to its last whole line, so it stays
loadable, the writer stops writing, and `failure` says what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codewhale.private_files import FILE_MODE, private_dir

try:
    import fcntl
except ImportError:  # Windows: no lock, so two processes on one session both append.
    fcntl = None  # type: ignore[assignment]

# Events worth keeping in the session file (deltas are not: the messages hold the text).
RECORDED_EVENTS = frozenset(
    {
        "turn_started",
        "tool_call_finished",
        "approval_resolved",
        "turn_complete",
        "error",
        "context_compacted",
    }
)
# What a recorded event repeats from the messages beside it: left out, so a payload is
# stored once (a 20 MB write_file argument was also in its diff; an answer, in its
# turn_complete). The resumed view rebuilds all three from the messages.
REPEATED_FIELDS = {
    "turn_started": "prompt",
    "turn_complete": "final_text",
    "tool_call_finished": "display",
}


# json.dumps(record, ensure_ascii=False), without building an encoder for every line.
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False)


class SessionInUse(Exception):
    """Another process has the session open for writing."""


@dataclass(frozen=True)
class SaveFailure:
    """Why the session file stopped being written."""

    path: Path
    reason: str  # the system's words, e.g. "No space left on device"

    def line(self) -> str:
        return f"could not save the session to {self.path}: {self.reason}"


def os_reason(error: OSError) -> str:
    return error.strerror or str(error)


class SessionWriter:
    """Appends records to one session file, which it holds locked while open."""

    recorded_events = RECORDED_EVENTS

    def __init__(
        self,
        path: Path,
        descriptor: int | None,
        failure: SaveFailure | None,
        *,
        created: bool = False,
    ) -> None:
        """Use `create` or `take`."""
        self.path = path
        self._fd = descriptor
        self._created = created
        self.failure = failure
        # Called once, with the failure, when a write fails (the runtime reports it).
        self.on_failure: Callable[[SaveFailure], None] | None = None
        self._pending: list[str] = []
        # The file's length up to its last whole line: a failed write is cut back to it.
        self._size = os.fstat(descriptor).st_size if descriptor is not None else 0
        self._written_messages = 0

    @classmethod
    def create(cls, path: Path) -> SessionWriter:
        """A new, empty session file (created 0600), locked; a failed writer if the disk
        refuses it."""
        try:
            private_dir(path.parent)
            descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except OSError as error:
            return cls(path, None, SaveFailure(path, os_reason(error)))
        _try_lock(descriptor)  # a file just made exclusively: nobody else has it
        return cls(path, descriptor, None, created=True)

    @classmethod
    def take(cls, path: Path) -> SessionWriter:
        """The existing session file at `path`, locked for this process; SessionInUse if
        another process holds it, a failed writer if it cannot be opened for writing."""
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_APPEND)
        except OSError as error:
            return cls(path, None, SaveFailure(path, os_reason(error)))
        if not _try_lock(descriptor):
            os.close(descriptor)
            raise SessionInUse(str(path))
        writer = cls(path, descriptor, None)
        try:
            torn = writer._size > 0 and os.pread(descriptor, 1, writer._size - 1) != b"\n"
        except OSError as error:
            writer._fail(error)
            return writer
        if torn:
            # A torn last line (a crash mid-write) would glue onto the next record.
            writer._pending.append("\n")
        return writer

    def _write(self, record: dict[str, Any]) -> None:
        if self.failure is None:
            self._pending.append(_LINE_ENCODER.encode(record) + "\n")

    def flush(self) -> None:
        """Write the waiting lines; a refusal cuts the file back and stops the writer."""
        if self.failure is not None or not self._pending or self._fd is None:
            return
        data = "".join(self._pending).encode("utf-8")
        self._pending.clear()
        try:
            _write_all(self._fd, data)
        except OSError as error:
            self._fail(error)
            return
        self._size += len(data)

    def _fail(self, error: OSError) -> None:
        self.failure = SaveFailure(self.path, os_reason(error))
        self._pending.clear()
        if self._fd is not None:
            # What reached the disk of the refused lines would be a torn last line.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def write_header(self, header: dict[str, Any]) -> None:
        self._write(header)
        # At once: `sessions list` (in another process) looks for the header.
        self.flush()

    def rewrite(self, lines: list[str]) -> None:
        """Replace the whole file with `lines` (a repaired session), in place: the lock
        stays on it. The caller has copied the old file aside first."""
        if self.failure is not None or self._fd is None:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        try:
            os.ftruncate(self._fd, 0)
            self._size = 0
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError as error:
            self._fail(error)
            return
        self._size = len(data)
        self._pending.clear()  # a fresh line for a torn end is no longer needed

    def skip_existing(self, count: int) -> None:
        """Messages already in the file (a resumed session) are not written again."""
        self._written_messages = count

    def record_messages(self, messages: list[dict[str, Any]]) -> None:
        """Write the messages added since the last call; a checkpoint, so flush."""
        for message in messages[self._written_messages :]:
            self._write({"kind": "message", "message": message})
        self._written_messages = len(messages)
        self.flush()

    def record_clear(self) -> None:
        """The conversation was cleared: loading starts over from the system prompt here."""
        self._write({"kind": "clear"})
        self._written_messages = 1

    def record_rewind(self, messages: list[dict[str, Any]], keep: int, title: str) -> None:
        """The conversation went back to its first `keep` messages (/rewind): loading drops
        the rest. Counted from the end, as a compaction keeps the newest messages as they
        are; `title` is the session's title after it (its first prompt left, or "")."""
        self.record_messages(messages)  # every message is in the file before it is dropped
        self._write({"kind": "rewind", "drop": self._written_messages - keep, "title": title})
        self._written_messages = keep
        self.flush()

    def record_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind not in RECORDED_EVENTS:
            return
        repeated = REPEATED_FIELDS.get(str(kind))
        if repeated is not None:
            event = {key: value for key, value in event.items() if key != repeated}
        self._write({"kind": "event", "event": event})
        if kind == "turn_complete":
            # The engine reports the end after its last checkpoint: flush it too, or
            # it would wait in memory for as long as the user is away.
            self.flush()

    def record_meter(self, totals: dict[str, Any]) -> None:
        """The session's token and cost totals so far; the last one wins on loading."""
        self._write({"kind": "meter", "meter": totals})
        self.flush()

    def sync(self) -> None:
        self.flush()
        if self.failure is None and self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as error:
                self._fail(error)

    def close(self) -> None:
        """Sync and release the file; one this writer made but could not write is removed."""
        if self._fd is None:
            return
        self.sync()
        descriptor, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            if self._created and self._size == 0:
                # Not even the header fitted: an empty file would only be junk.
                self.path.unlink()
            os.close(descriptor)


def _try_lock(descriptor: int) -> bool:
    """Lock the open file for this process; False if another process holds it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True  # a file system without locks (some network mounts): write unlocked
    return True


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]
