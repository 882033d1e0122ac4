"""Files on disk for sub-agents: the state file and its journals, transcripts, checkpoints.

The state file (`.codewhale/state/subagents.v1.json`) is a snapshot of every
record, replaced atomically under a lock file. Between snapshots each writing
process appends the changes of its records to a journal of its own
(`subagents.v1.journal.<generation>`, one JSON line per change: changed fields and
new events); the snapshot lists the journals that continue it, each with the offset
already folded in and the process appending to it (state.reading). Reading replays
them under the lock, so `codewhale agents list` in another process sees current
records.

Several processes may share a workspace: a snapshot is written from the records on
disk, re-read under the lock, merged with this process's (state.merge); a journal
is removed only once folded in and its process is gone. Whatever cannot be read is
skipped with one warning, and the damaged file is copied aside before it is
rewritten (state.damage). Transcripts are JSONL, appended as messages happen.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from codewhale.atomic import atomic_write_text
from codewhale.paths import WorkspacePaths
from codewhale.private_files import FILE_MODE, private_dir, private_opener
from codewhale.sessions.records import valid_message
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.state.damage import damage_warning, set_aside
from codewhale.subagents.state.merge import merge, trim
from codewhale.subagents.state.owners import owner_alive, this_process
from codewhale.subagents.state.reading import (
    SCHEMA_VERSION,
    DiskState,
    JournalEntry,
    StateFileError,
    StateFiles,
    read_state,
    replay,
)
from codewhale.workspace_state import make_state_dir

__all__ = ["RESTART_REASON", "StateFileError", "StateWriteError", "SubagentStore", "Written"]

RESTART_REASON = "Interrupted by process restart"


class StateWriteError(OSError):
    """A file of the sub-agent state could not be written (disk full, read-only, too big).

    `str()` is the one line to show: "could not write <path>: <reason>".
    """

    def __init__(self, path: Path, reason: str, errno: int | None = None) -> None:
        super().__init__(errno, reason, str(path))
        self.path = path
        # The system's words, e.g. "No space left on device".
        self.reason = reason

    @classmethod
    def of(cls, path: Path, error: OSError) -> StateWriteError:
        return cls(path, error.strerror or str(error), error.errno)

    def __str__(self) -> str:
        return f"could not write {self.path}: {self.reason}"


@dataclass(frozen=True)
class Written:
    """A snapshot just written: its journal's generation, its size, the ids it holds."""

    generation: int
    size: int
    kept: frozenset[str]


@dataclass
class _Seen:
    """The state as this store last saw it on disk (read or written itself)."""

    agents: dict[str, dict[str, Any]]
    journals: list[JournalEntry]
    # The snapshot file's identity then: unchanged, nobody else has rewritten it.
    signature: tuple[int, ...] | None


class SubagentStore:
    def __init__(self, workspace: Path) -> None:
        paths = WorkspacePaths(workspace)
        self.state_file = paths.subagents_state_file
        self.files = StateFiles(self.state_file)
        self.lock_file = self.state_file.with_suffix(".lock")
        self.transcripts_dir = paths.transcripts_dir
        # The newest journal generation seen on disk (by a load or a snapshot written here).
        self.generation = 0
        # Names this store's journals apart from another store's in the same process.
        self.writer_id = secrets.token_hex(4)
        # Damage found and set aside (one warning per file), for the owner to report.
        self.warnings: list[str] = []
        self._seen: _Seen | None = None
        # Each record as this process's memory held it when last in step with the disk
        # (loaded, or written from memory): the base the merge tells our changes by.
        self._base: dict[str, dict[str, Any]] = {}
        # agent_id -> (first and last event seq, the encoded event list).
        self._encoded_events: dict[str, tuple[tuple[int, int, int], str]] = {}
        # The journal file appends go to: (generation, open descriptor).
        self._journal: tuple[int, int] | None = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            make_state_dir(self.lock_file.parent)
            lock = FileLock(self.lock_file, mode=FILE_MODE)
            lock.acquire()
        except OSError as error:
            raise StateWriteError.of(self.lock_file, error) from None
        try:
            yield
        finally:
            lock.release()

    def load(self) -> list[WorkerRecord]:
        """Every valid record: the snapshot with its journals replayed; none without a file.

        Damage is skipped, set aside and the file rewritten (see `warnings`).
        """
        if not self.state_file.parent.is_dir():
            return []
        try:
            with self._locked():
                state = self._read_and_repair()
        except StateWriteError:  # no lock here (read-only): read all the same
            state = read_state(self.files)
            self._warn_damage(state, None, "the state folder is not writable")
        return [WorkerRecord.from_json(agent) for agent in trim(list(state.agents.values()))]

    def _read_and_repair(self) -> DiskState:
        state = read_state(self.files)
        self._remember(state.agents, state.journals, state.generation)
        self._base = dict(state.agents)
        if state.damage:
            try:
                self._rewrite(state, [])
            except StateWriteError as error:
                self._warn_damage(state, None, error.reason)
        return state

    # -- the snapshot ----------------------------------------------------------------------

    def snapshot(self, records: list[WorkerRecord]) -> list[dict[str, Any]]:
        """Plain copies of the records, cheap enough for the event loop (encoded later)."""
        return [record.to_json() for record in records]

    def write(self, snapshot: list[dict[str, Any]]) -> Written:
        """Merge these records into the state on disk and write it as a new snapshot, all
        under the lock. Blocking: run it off the event loop. Raises StateWriteError."""
        with self._locked():
            try:
                state = self._current()
            except StateFileError as error:  # a newer version's file appeared: never overwrite
                reason = str(error).removeprefix(f"{self.state_file}: ")
                raise StateWriteError(self.state_file, reason) from None
            return self._rewrite(state, snapshot)

    def _current(self) -> DiskState:
        """The state on disk now: what this store last saw, with the other journals'
        new lines, while nobody has rewritten the snapshot; else read afresh."""
        seen = self._seen
        if seen is None or seen.signature != self._signature():
            return read_state(self.files, skip_writer=self.writer_id)
        state = DiskState(agents=dict(seen.agents), generation=self.generation)
        for entry in seen.journals:
            if entry.writer != self.writer_id:
                entry = replay(self.files.journal(entry.generation), entry, state)
            state.journals.append(entry)
        return state

    def _rewrite(self, state: DiskState, ours: list[dict[str, Any]]) -> Written:
        """Write `state` with `ours` merged in, continued by a new journal of this store;
        journals folded in whose process is gone (and damaged files, copied aside) go."""
        records = merge(self._base, state.agents, ours)
        on_disk = self.files.journals_on_disk()
        generation = max([self.generation, state.generation, *(n for n, _ in on_disk)]) + 1
        journals = [entry for entry in state.journals if self._still_appended(entry)]
        journals.append(JournalEntry(generation, 0, this_process(), self.writer_id))
        copies = self._set_aside(state)
        text = self._encode(records, generation, journals)
        try:
            atomic_write_text(self.state_file, text, mode=FILE_MODE)
        except OSError as error:
            raise StateWriteError.of(self.state_file, error) from None
        self._remember({r["agent_id"]: r for r in records}, journals, generation)
        if ours:
            self._base = {data["agent_id"]: data for data in ours}
        # Only now: a crash before the snapshot landed still needs the older journals.
        listed = {entry.generation for entry in journals}
        for number, path in on_disk:
            if number not in listed:
                path.unlink(missing_ok=True)
        self._warn_damage(state, copies)
        return Written(generation, len(text), frozenset(r["agent_id"] for r in records))

    def _still_appended(self, entry: JournalEntry) -> bool:
        """A journal another store may still append to (its process lives)."""
        if entry.owner is None or entry.writer == self.writer_id:
            return False
        return owner_alive(entry.owner.pid, entry.owner.start)

    def _remember(
        self, agents: dict[str, dict[str, Any]], journals: list[JournalEntry], generation: int
    ) -> None:
        self._seen = _Seen(agents, journals, self._signature())
        self.generation = max(self.generation, generation)

    def _signature(self) -> tuple[int, ...] | None:
        try:
            stat = self.state_file.stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)

    def _set_aside(self, state: DiskState) -> dict[Path, Path]:
        """Copy each damaged file aside, before it is rewritten or removed."""
        copies = {}
        for path in state.damage:
            try:
                copies[path] = set_aside(path)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise StateWriteError.of(path, error) from None
        return copies

    def _warn_damage(
        self, state: DiskState, copies: dict[Path, Path] | None, why: str = ""
    ) -> None:
        """One warning per damaged file: set aside (its copy), or not (`why`)."""
        for path, problems in state.damage.items():
            copy = copies.get(path) if copies is not None else None
            self.warnings.append(damage_warning(path, problems, copy, why))
        state.damage = {}

    def _encode(
        self, records: list[dict[str, Any]], generation: int, journals: list[JournalEntry]
    ) -> str:
        agents = ",".join(self._encode_record(data) for data in records)
        if len(self._encoded_events) > 2 * len(records) + 16:  # records no longer kept
            kept = {data["agent_id"] for data in records}
            self._encoded_events = {
                key: value for key, value in self._encoded_events.items() if key in kept
            }
        listed = _dumps([entry.to_json() for entry in journals])
        # `journal`: the generation an older CodeWhale replays from.
        return (
            f'{{"schema_version":{SCHEMA_VERSION},"journal":{generation},'
            f'"journals":{listed},"agents":[{agents}]}}'
        )

    def _encode_record(self, data: dict[str, Any]) -> str:
        """One record as JSON, reusing the encoding of its events while they are unchanged.

        Events never change once recorded and make up most of the file; a record's list
        only grows at its end and is cut at its start, so its first and last sequence
        numbers say whether it is the list last encoded (and the last one's time, whether
        another process's copy of the record took another turn).
        """
        data = dict(data)
        events = data.pop("events")
        span = (events[0]["seq"], events[-1]["seq"], events[-1]["ts_ms"]) if events else (0, 0, 0)
        cached = self._encoded_events.get(data["agent_id"])
        if cached is None or cached[0] != span:
            cached = self._encoded_events[data["agent_id"]] = (span, _dumps(events))
        return f'{_dumps(data)[:-1]},"events":{cached[1]}}}'

    # -- the journal -----------------------------------------------------------------------

    def journal_path(self, generation: int) -> Path:
        return self.files.journal(generation)

    def append_journal(self, generation: int, lines: list[str]) -> int:
        """Append whole lines to that generation's journal (one write); returns the bytes.

        Not flushed to the disk: a crash of the process loses nothing written, a crash of
        the machine what the system had not yet written back (the snapshot is fsync'd).
        Raises StateWriteError.
        """
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        path = self.journal_path(generation)
        try:
            if self._journal is None or self._journal[0] != generation:
                self.close_journal()
                self._journal = (generation, _open_for_append(path))
            view = memoryview(data)
            while view:
                view = view[os.write(self._journal[1], view) :]
        except OSError as error:
            raise StateWriteError.of(path, error) from None
        return len(data)

    def close_journal(self) -> None:
        if self._journal is not None:
            os.close(self._journal[1])
            self._journal = None

    # -- transcripts -----------------------------------------------------------------------

    def transcript_path(self, agent_id: str) -> Path:
        return self.transcripts_dir / f"{agent_id}.jsonl"

    def checkpoint(self, agent_id: str, messages: int) -> dict[str, Any]:
        """A continuable checkpoint: the first `messages` lines of the child's transcript."""
        return {"transcript": str(self.transcript_path(agent_id)), "messages": messages}

    def load_transcript(self, agent_id: str) -> list[dict[str, Any]]:
        """The messages up to the first line that is not a whole, valid message (a torn
        last line, a crash mid-write, or damage): a conversation fit to send again."""
        path = self.transcript_path(agent_id)
        messages = []
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.endswith("\n"):
                        break
                    try:
                        message = valid_message(json.loads(line))
                    except (ValueError, RecursionError):
                        break
                    if message is None:
                        break
                    messages.append(message)
        except FileNotFoundError:
            return []
        return messages

    def rewrite_transcript(self, agent_id: str, messages: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
        path = self.transcript_path(agent_id)
        try:
            atomic_write_text(path, text, mode=FILE_MODE)
        except OSError as error:
            raise StateWriteError.of(path, error) from None

    def append_transcript(self, agent_id: str, messages: list[dict[str, Any]]) -> None:
        """Append messages as lines; raises StateWriteError (the child cannot go on)."""
        text = "".join(json.dumps(message, ensure_ascii=False) + "\n" for message in messages)
        path = self.transcript_path(agent_id)
        try:
            try:
                _append_text(path, text)
            except FileNotFoundError:  # the first transcript (or someone removed the folder)
                private_dir(self.transcripts_dir)
                _append_text(path, text)
        except OSError as error:
            raise StateWriteError.of(path, error) from None


def _append_text(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8", opener=private_opener) as handle:
        handle.write(text)


def _open_for_append(path: Path) -> int:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        return os.open(path, flags, FILE_MODE)
    except FileNotFoundError:  # the state folder was removed meanwhile
        private_dir(path.parent)
        return os.open(path, flags, FILE_MODE)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
