"""Conversations on disk: one JSONL file per session under the user data dir.

Line 1 describes the session; every later line is one message or one event.
Lines are buffered and flushed at the engine's checkpoints (record_messages, which
it calls before every request and after every round of tool results), and fsynced
at turn boundaries (sync). A crash of the process loses at most the lines written
since the last checkpoint (events, a clear); a crash of the machine, at most those
since the last turn boundary. A line torn by the crash is skipped with a warning
when loading.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from codewhale import __version__
from codewhale.private_files import private_dir, private_opener

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


def new_session_id() -> str:
    return time.strftime("sess_%Y%m%d_%H%M%S_", time.gmtime()) + secrets.token_hex(3)


@dataclass(frozen=True)
class SessionInfo:
    id: str
    path: Path
    workspace: str
    created_at: float
    model: str
    title: str = ""


@dataclass
class LoadedSession:
    info: SessionInfo
    messages: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    # The last usage totals recorded (UsageMeter.to_json), or None.
    meter: dict[str, Any] | None = None
    # Per message, its size as compact JSON in bytes (what the context estimate counts,
    # engine/compaction.py encoded_size), taken from the line it was read from; None where
    # the line cannot tell (a compaction's summary). The first estimate then encodes none.
    sizes: list[int | None] = field(default_factory=list)


class SessionError(Exception):
    """A session that cannot be found or read."""


class SessionWriter:
    """Appends records to one session file."""

    recorded_events = RECORDED_EVENTS

    def __init__(self, path: Path) -> None:
        private_dir(path.parent)
        self.path = path
        # Open for the writer's life (close() closes it); created 0600.
        self._file: IO[str] = open(path, "a", encoding="utf-8", opener=private_opener)  # noqa: SIM115
        self._written_messages = 0

    def _write(self, record: dict[str, Any]) -> None:
        # Buffered, not flushed: a flush per line cost a syscall per event. Flushed at the
        # engine's checkpoints (record_messages), so a crash loses at most the lines since
        # the last one. The file's own buffer may write a long line early and a crash tear
        # it; loading skips a torn line.
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")

    def write_header(self, info: SessionInfo) -> None:
        self._write(
            {
                "kind": "session",
                "id": info.id,
                "workspace": info.workspace,
                "created_at": info.created_at,
                "model": info.model,
                "version": __version__,
            }
        )
        # At once: `sessions list` (in another process) skips a file without its header.
        self._file.flush()

    def start_fresh_line(self) -> None:
        self._file.write("\n")
        self._file.flush()

    def skip_existing(self, count: int) -> None:
        """Messages already in the file (a resumed session) are not written again."""
        self._written_messages = count

    def record_messages(self, messages: list[dict[str, Any]]) -> None:
        """Write the messages added since the last call; a checkpoint, so flush."""
        for message in messages[self._written_messages :]:
            self._write({"kind": "message", "message": message})
        self._written_messages = len(messages)
        self._file.flush()

    def record_clear(self) -> None:
        """The conversation was cleared: loading starts over from the system prompt here."""
        self._write({"kind": "clear"})
        self._written_messages = 1

    def record_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in RECORDED_EVENTS:
            self._write({"kind": "event", "event": event})
            if kind == "turn_complete":
                # The engine reports the end after its last checkpoint: flush it too, or
                # it would wait in the buffer for as long as the user is away.
                self._file.flush()

    def record_meter(self, totals: dict[str, Any]) -> None:
        """The session's token and cost totals so far; the last one wins on loading."""
        self._write({"kind": "meter", "meter": totals})
        self._file.flush()

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()


class SessionStore:
    """All sessions of this user."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "sessions"

    def create(self, workspace: Path, model: str) -> tuple[SessionInfo, SessionWriter]:
        session_id = new_session_id()
        info = SessionInfo(
            session_id, self.root / f"{session_id}.jsonl", str(workspace), time.time(), model
        )
        writer = SessionWriter(info.path)
        writer.write_header(info)
        return info, writer

    def list(self, workspace: Path | None = None) -> list[SessionInfo]:
        """Sessions newest first, optionally only those of one workspace."""
        only = None if workspace is None else str(workspace)
        sessions = []
        for path in self.root.glob("sess_*.jsonl"):
            info = _read_info(path, only)
            if info is not None:
                sessions.append(info)
        return sorted(sessions, key=lambda info: info.created_at, reverse=True)

    def latest(self, workspace: Path) -> SessionInfo | None:
        found = self.list(workspace)
        return found[0] if found else None

    def info(self, session_id: str) -> SessionInfo:
        """The session's header and title, without parsing its messages; SessionError if
        there is no such session."""
        path = self._path(session_id)
        info = _read_info(path)
        if info is None:
            raise SessionError(f"{path}: not a CodeWhale session file")
        return info

    def _path(self, session_id: str) -> Path:
        path = self.root / f"{session_id}.jsonl"
        if "/" in session_id or not path.is_file():
            raise SessionError(f"no session '{session_id}' (see `codewhale sessions list`)")
        return path

    def load(self, session_id: str) -> LoadedSession:
        path = self._path(session_id)
        messages: list[dict[str, Any]] = []
        sizes: list[int | None] = []
        warnings: list[str] = []
        meter: dict[str, Any] | None = None
        title = ""
        with path.open(encoding="utf-8", errors="replace") as handle:
            lines = handle.read().split("\n")
        try:
            header = json.loads(lines[0])
        except ValueError:
            header = None
        if not _is_header(header):
            raise SessionError(f"{path}: not a CodeWhale session file")
        for number, line, record in _records(lines):
            if record is None:
                warnings.append(
                    f"{path}, line {number}: unreadable record skipped (likely a crash mid-write)"
                )
                continue
            if not isinstance(record, dict):
                continue
            title = _retitle(title, record)
            if record.get("kind") == "message":
                messages.append(record["message"])
                sizes.append(_message_size(line, record))
            elif record.get("kind") == "clear":
                del messages[1:], sizes[1:]
            elif record.get("kind") == "event" and _is_compaction(record.get("event")):
                if _compact(messages, record["event"]):
                    sizes[1 : len(sizes) - record["event"]["kept"]] = [None]  # the summary
                else:
                    warnings.append(f"{path}, line {number}: unusable compaction record skipped")
            elif record.get("kind") == "meter" and isinstance(record.get("meter"), dict):
                meter = record["meter"]
        return LoadedSession(_info(path, header, title), messages, warnings, meter, sizes)

    def open_for_append(self, loaded: LoadedSession) -> SessionWriter:
        writer = SessionWriter(loaded.info.path)
        # A torn last line would glue onto the next record; start on a fresh line.
        with loaded.info.path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            torn = False
            if size:
                handle.seek(size - 1)
                torn = handle.read(1) != b"\n"
        if torn:
            writer.start_fresh_line()
        writer.skip_existing(len(loaded.messages))
        return writer


def _records(lines: list[str]) -> Iterator[tuple[int, str, Any]]:
    """(line number, line, its record or None if unreadable) for the lines after the header.

    One parse of all of them as a JSON array (a long session's lines parsed one by one
    cost a third more); line by line only when that fails, to find the torn line.
    """
    numbered = [(number, line) for number, line in enumerate(lines[1:], start=2) if line]
    # Every object parsed lives on (the conversation): the collector, run by the
    # allocations, would only walk them (and the whole heap) again and again meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        records = json.loads("[" + ",".join(line for _, line in numbered) + "]")
    except ValueError:
        records = None
    finally:
        if collecting:
            gc.enable()
    if records is not None and len(records) == len(numbered):
        for (number, line), record in zip(numbered, records, strict=True):
            yield number, line, record
        return
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            yield number, line, json.loads(line)
        except ValueError:
            yield number, line, None


# A message's line as SessionWriter writes it: this, the message, "}".
MESSAGE_LINE = '{"kind": "message", "message": '
_NESTED = (dict, list)


def _message_size(line: str, record: dict[str, Any]) -> int | None:
    """The record's message as compact JSON, in bytes, from the line it was read from.

    The line holds it with json.dumps' default separators (", " and ": "): one space
    more per separator than the compact form, which the message's own structure counts.
    """
    if len(record) != 2 or not (line.startswith(MESSAGE_LINE) and line.endswith("}")):
        return None  # not as SessionWriter writes it
    size = len(line) if line.isascii() else len(line.encode("utf-8"))
    size -= len(MESSAGE_LINE) + 1
    message = record["message"]
    return size - _separators(message) if isinstance(message, _NESTED) else size


def _separators(value: dict[str, Any] | list[Any]) -> int:
    """How many separators JSON puts in `value`: one per key, one between items."""
    if isinstance(value, dict):
        count = 2 * len(value) - 1 if value else 0
        items: Iterable[Any] = value.values()
    else:
        count = len(value) - 1 if value else 0
        items = value
    for item in items:
        if isinstance(item, _NESTED):
            count += _separators(item)
    return count


def _is_compaction(event: Any) -> bool:
    return isinstance(event, dict) and event.get("type") == "context_compacted"


def _compact(messages: list[dict[str, Any]], event: dict[str, Any]) -> bool:
    """Apply a `context_compacted` event: its summary stands for all but the last `kept`."""
    summary, kept = event.get("summary"), event.get("kept")
    if not isinstance(summary, dict) or not isinstance(kept, int) or isinstance(kept, bool):
        return False
    if not 0 <= kept < len(messages):
        return False
    messages[1 : len(messages) - kept] = [summary]
    return True


def _read_info(path: Path, workspace: str | None = None) -> SessionInfo | None:
    """The session's header and title; None if it is not a session file, or (`workspace`
    given) another workspace's, whose lines are then not read."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            header = json.loads(handle.readline())
            if not _is_header(header) or (
                workspace is not None and str(header.get("workspace")) != workspace
            ):
                return None
            title = ""
            for line in handle:
                if title and '"clear"' not in line:
                    continue  # only a clear marker can change the title now
                try:
                    title = _retitle(title, json.loads(line))
                except ValueError:
                    continue
    except (OSError, ValueError):
        return None
    return _info(path, header, title)


def _is_header(header: Any) -> bool:
    return isinstance(header, dict) and header.get("kind") == "session"


def _retitle(title: str, record: Any) -> str:
    """The title after `record`: the first prompt since the last clear marker."""
    if not isinstance(record, dict):
        return title
    if record.get("kind") == "clear":
        return ""  # a cleared conversation is named by what came after
    message = record.get("message")
    if title or record.get("kind") != "message" or not isinstance(message, dict):
        return title
    return str(message.get("content") or "")[:80] if message.get("role") == "user" else title


def _info(path: Path, header: dict[str, Any], title: str) -> SessionInfo:
    return SessionInfo(
        id=str(header.get("id")),
        path=path,
        workspace=str(header.get("workspace")),
        created_at=float(header.get("created_at") or 0),
        model=str(header.get("model") or ""),
        title=title,
    )
