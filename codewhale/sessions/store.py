"""Conversations on disk: one JSONL file per session under the user data dir.

Line 1 describes the session; every later line is one message or one event. Writing
is SessionWriter's (sessions/writer.py), reading reading.py's. The store decides who
writes: a resumed session is taken by one process at a time (a second one continues
in a fork), and a damaged file is copied aside before it is rewritten without its
damaged lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale import __version__
from codewhale.private_files import FILE_MODE
from codewhale.sessions.reading import ParsedSession, read_header, read_session
from codewhale.sessions.writer import SessionInUse, SessionWriter, os_reason

# Damaged lines named in the warning; the rest are counted.
NAMED_DAMAGE = 3


def new_session_id() -> str:
    return time.strftime("sess_%Y%m%d_%H%M%S_", time.gmtime()) + secrets.token_hex(3)


@dataclass(frozen=True)
class SessionInfo:
    id: str
    path: Path
    workspace: str  # "" when its header was damaged and nothing else names it
    created_at: float
    model: str
    title: str = ""
    # The header line was damaged and this was read from the other lines; resuming the
    # session writes a new one.
    recovered: bool = False


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


@dataclass
class ResumedSession:
    """A session taken to be written on: the one asked for, or a fork of it."""

    loaded: LoadedSession
    writer: SessionWriter


class SessionError(Exception):
    """A session that cannot be found or read."""


class SessionStore:
    """All sessions of this user."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "sessions"

    def create(
        self, workspace: Path, model: str, *, forked_from: str | None = None
    ) -> tuple[SessionInfo, SessionWriter]:
        """A new session; its writer has `failure` set if the disk refused it."""
        session_id = new_session_id()
        info = SessionInfo(
            session_id, self.root / f"{session_id}.jsonl", str(workspace), time.time(), model
        )
        header: dict[str, Any] = {
            "kind": "session",
            "id": info.id,
            "workspace": info.workspace,
            "created_at": info.created_at,
            "model": info.model,
            "version": __version__,
        }
        if forked_from is not None:
            header["forked_from"] = forked_from
        writer = SessionWriter.create(info.path)
        writer.write_header(header)
        return info, writer

    def list(self, workspace: Path | None = None) -> list[SessionInfo]:
        """Sessions newest first, optionally only those of one workspace (with those
        whose damaged header lost their workspace, so they can still be found)."""
        only = None if workspace is None else str(workspace)
        sessions = []
        for path in self.root.glob("sess_*.jsonl"):
            info = _read_info(path, only)
            if info is not None:
                sessions.append(info)
        return sorted(sessions, key=lambda info: info.created_at, reverse=True)

    def latest(self, workspace: Path) -> SessionInfo | None:
        """This workspace's newest session (not one whose workspace is unknown)."""
        found = [info for info in self.list(workspace) if info.workspace]
        return found[0] if found else None

    def resumable(self, workspace: Path, session_id: str | None) -> SessionInfo | None:
        """What `--resume session_id` (or, without one, `--continue`) resumes: the session
        named, else the workspace's newest (None when it has none)."""
        return self.info(session_id) if session_id else self.latest(workspace)

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
        """The session as it would be resumed, without taking it: damaged lines are
        skipped, and said in one warning."""
        path = self._path(session_id)
        parsed = _parse(path)
        warnings = [_damage_warning(path, parsed.damage)] if parsed.damage else []
        return _loaded(path, parsed, warnings)

    def resume(self, session_id: str, workspace: Path, model: str) -> ResumedSession:
        """The session, taken for writing by this process; if another process has it,
        a new session copying its conversation. A damaged file is set aside as
        `<name>.damaged-<time>` and rewritten from its readable lines."""
        path = self._path(session_id)
        try:
            writer = SessionWriter.take(path)
        except SessionInUse:
            return self._fork(session_id, workspace, model)
        try:
            parsed = _parse(path)
        except SessionError:
            writer.close()
            raise
        warnings = []
        if parsed.damage:
            warnings.append(_repair(path, parsed, writer, workspace))
        loaded = _loaded(path, parsed, warnings)
        writer.skip_existing(len(loaded.messages))
        return ResumedSession(loaded, writer)

    def _fork(self, session_id: str, workspace: Path, model: str) -> ResumedSession:
        source = self.load(session_id)
        info, writer = self.create(workspace, model, forked_from=session_id)
        writer.record_messages(source.messages)
        if source.meter is not None:
            writer.record_meter(source.meter)
        note = (
            f"session {session_id} is open in another CodeWhale process, so this one goes on "
            f"in a new session, {info.id}, with a copy of its conversation (the other "
            f"process keeps writing {session_id})"
        )
        loaded = LoadedSession(
            info, source.messages, [*source.warnings, note], source.meter, source.sizes
        )
        return ResumedSession(loaded, writer)


def _parse(path: Path) -> ParsedSession:
    try:
        parsed = read_session(path)
    except OSError as error:
        raise SessionError(f"cannot read {path}: {os_reason(error)}") from None
    if parsed is None:
        raise SessionError(f"{path}: not a CodeWhale session file")
    return parsed


def _loaded(path: Path, parsed: ParsedSession, warnings: list[str]) -> LoadedSession:
    info = _info(path, parsed.header, parsed.title, recovered=parsed.recovered)
    return LoadedSession(info, parsed.messages, warnings, parsed.meter, parsed.sizes)


def _damage_warning(path: Path, damage: list[str]) -> str:
    named = "; ".join(damage[:NAMED_DAMAGE])
    more = f"; and {len(damage) - NAMED_DAMAGE} more" if len(damage) > NAMED_DAMAGE else ""
    return f"{path}: damaged lines skipped ({named}{more})"


def _repair(path: Path, parsed: ParsedSession, writer: SessionWriter, workspace: Path) -> str:
    """Copy the damaged file aside, then rewrite it from its readable lines; says so."""
    warning = _damage_warning(path, parsed.damage)
    try:
        aside = _set_aside(path)
    except OSError as error:
        # Never rewrite what could not be copied first: the damaged lines stay skipped.
        return f"{warning}. It could not be copied aside ({os_reason(error)}): left as it is"
    header = dict(parsed.header)
    if parsed.recovered:
        header["workspace"] = header["workspace"] or str(workspace)
        header["version"] = __version__
    writer.rewrite([json.dumps(header, ensure_ascii=False), *parsed.kept])
    kept = f"{warning}. The file as it was is kept as {aside}"
    if writer.failure is not None:
        return f"{kept}; rewriting it failed ({writer.failure.reason})"
    parsed.header, parsed.recovered = header, False
    return f"{kept}; the session goes on without them"


def _set_aside(path: Path) -> Path:
    """A private copy of `path` beside it, named for when it was made."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for attempt in range(1, 100):
        suffix = f".damaged-{stamp}" + (f"-{attempt}" if attempt > 1 else "")
        aside = path.with_name(path.name + suffix)
        try:
            descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            continue
        try:
            with open(descriptor, "wb") as copy, path.open("rb") as original:
                shutil.copyfileobj(original, copy)
                copy.flush()
                os.fsync(copy.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                aside.unlink()
            raise
        return aside
    raise FileExistsError(f"{path.name}.damaged-{stamp}: too many copies this second")


def _read_info(path: Path, workspace: str | None = None) -> SessionInfo | None:
    """The session's header and title; None if it is not a session file, or (`workspace`
    given) another workspace's, whose lines are then not read."""
    try:
        header, title = read_header(path, workspace)
        if header is None:
            # Rare: the header line is damaged. The other lines say what they can.
            parsed = read_session(path)
            if parsed is None:
                return None
            header, title = parsed.header, parsed.title
            recovered = True
        else:
            recovered = False
    except OSError:
        return None
    if workspace is not None and header["workspace"] not in (workspace, ""):
        return None
    return _info(path, header, title, recovered=recovered)


def _info(path: Path, header: dict[str, Any], title: str, *, recovered: bool) -> SessionInfo:
    return SessionInfo(
        id=header["id"],
        path=path,
        workspace=header["workspace"],
        created_at=float(header["created_at"]),
        model=header["model"],
        title=title,
        recovered=recovered,
    )
