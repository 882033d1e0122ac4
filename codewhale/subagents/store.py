"""Files on disk for sub-agents: the state file and its journal, transcripts, checkpoints.

The state file (`.codewhale/state/subagents.v1.json`) is a snapshot of every
record, replaced atomically under a lock file; its `journal` field names the
generation of the journal that continues it (`subagents.v1.journal.<generation>`,
one JSON line per change of a record since the snapshot: its changed fields and
new events). Reading replays the journal over the snapshot
under the same lock, so `codewhale agents list` in another process sees current
records. A torn last journal line (a crash mid-write) is skipped. Transcripts are
JSONL, appended as messages happen.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

from codewhale.atomic import atomic_write_text
from codewhale.paths import WorkspacePaths
from codewhale.private_files import FILE_MODE, private_dir, private_opener
from codewhale.subagents.records import MAX_EVENTS, WorkerRecord

SCHEMA_VERSION = 1
# The snapshot's field naming the journal generation that continues it.
JOURNAL_KEY = "journal"
MAX_RECORDS = 256
RESTART_REASON = "Interrupted by process restart"


class StateFileError(Exception):
    """A state file we must not touch (other schema version, unreadable JSON)."""


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SubagentStore:
    def __init__(self, workspace: Path) -> None:
        paths = WorkspacePaths(workspace)
        self.state_file = paths.subagents_state_file
        self.lock_file = self.state_file.with_suffix(".lock")
        self.transcripts_dir = paths.transcripts_dir
        # The newest journal generation seen on disk (by a load or a snapshot written here).
        self.generation = 0
        # agent_id -> (first and last event seq, the encoded event list); used only by
        # the single writer.
        self._encoded_events: dict[str, tuple[tuple[int, int], str]] = {}
        # The journal file appends go to: (generation, open descriptor).
        self._journal: tuple[int, int] | None = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.lock_file.parent)
        with FileLock(self.lock_file, mode=FILE_MODE):
            yield

    def load(self) -> list[WorkerRecord]:
        """Every record: the snapshot with its journal replayed; no file is an empty list."""
        if not self.state_file.parent.is_dir():
            return []
        with self._locked():
            document = self._read_snapshot()
            generation = document.get(JOURNAL_KEY, 0)
            if not isinstance(generation, int) or isinstance(generation, bool):
                generation = 0
            agents = {_key(agent, n): agent for n, agent in enumerate(document.get("agents", []))}
            journals = self._journals()
            for number, path in journals:
                if number >= generation:
                    _replay(path, agents)
        self.generation = max([generation, *(number for number, _ in journals)])
        return trim([WorkerRecord.from_json(agent) for agent in agents.values()])

    def _read_snapshot(self) -> dict[str, Any]:
        try:
            text = self.state_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            document = json.loads(text)
        except ValueError as error:
            raise StateFileError(f"{self.state_file}: not valid JSON ({error})") from None
        version = document.get("schema_version") if isinstance(document, dict) else None
        if version != SCHEMA_VERSION:
            raise StateFileError(
                f"{self.state_file}: schema_version {version!r} is not supported "
                f"(this CodeWhale reads version {SCHEMA_VERSION}); the file was left untouched"
            )
        snapshot: dict[str, Any] = document
        return snapshot

    def journal_path(self, generation: int) -> Path:
        return self.state_file.with_name(f"{self.state_file.stem}.journal.{generation}")

    def _journals(self) -> list[tuple[int, Path]]:
        """The journal files on disk, oldest generation first."""
        found = []
        for path in self.state_file.parent.glob(f"{self.state_file.stem}.journal.*"):
            suffix = path.name.rsplit(".", 1)[1]
            if suffix.isdigit():
                found.append((int(suffix), path))
        return sorted(found)

    def next_generation(self) -> int:
        """A generation newer than any on disk, for the next snapshot and its journal."""
        if self.state_file.parent.is_dir():
            self.generation = max([self.generation, *(n for n, _ in self._journals())])
        self.generation += 1
        return self.generation

    def snapshot(self, records: list[WorkerRecord]) -> list[dict[str, Any]]:
        """Plain copies of the records to keep (oldest finished dropped past 256).

        Cheap enough for the event loop; the copies may then be encoded in another thread.
        """
        return [record.to_json() for record in trim(records)]

    def write(self, snapshot: list[dict[str, Any]], generation: int) -> int:
        """Replace the snapshot (encoded, atomically, under the lock) and delete the journals
        it supersedes; returns its size. Blocking: run it off the event loop."""
        agents = ",".join(self._encode_record(data) for data in snapshot)
        if len(self._encoded_events) > 2 * len(snapshot) + 16:  # records no longer kept
            kept = {data["agent_id"] for data in snapshot}
            self._encoded_events = {
                key: value for key, value in self._encoded_events.items() if key in kept
            }
        text = (
            f'{{"schema_version":{SCHEMA_VERSION},"{JOURNAL_KEY}":{generation},'
            f'"agents":[{agents}]}}'
        )
        with self._locked():
            atomic_write_text(self.state_file, text, mode=FILE_MODE)
            # Only now: a crash before the snapshot landed still needs the older journals.
            for number, path in self._journals():
                if number < generation:
                    path.unlink(missing_ok=True)
        return len(text)

    def append_journal(self, generation: int, lines: list[str]) -> int:
        """Append whole lines to that generation's journal (one write); returns the bytes.

        Not flushed to the disk: a crash of the process loses nothing written, a crash of
        the machine what the system had not yet written back (the snapshot is fsync'd).
        """
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        if self._journal is None or self._journal[0] != generation:
            self.close_journal()
            path = self.journal_path(generation)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            try:
                descriptor = os.open(path, flags, FILE_MODE)
            except FileNotFoundError:  # the state folder was removed meanwhile
                private_dir(path.parent)
                descriptor = os.open(path, flags, FILE_MODE)
            self._journal = (generation, descriptor)
        view = memoryview(data)
        while view:
            view = view[os.write(self._journal[1], view) :]
        return len(data)

    def close_journal(self) -> None:
        if self._journal is not None:
            os.close(self._journal[1])
            self._journal = None

    def _encode_record(self, data: dict[str, Any]) -> str:
        """One record as JSON, reusing the encoding of its events while they are unchanged.

        Events never change once recorded and make up most of the file; a record's list
        only grows at its end and is cut at its start, so its first and last sequence
        numbers say whether it is the list last encoded.
        """
        data = dict(data)
        events = data.pop("events")
        span = (events[0]["seq"], events[-1]["seq"]) if events else (0, 0)
        cached = self._encoded_events.get(data["agent_id"])
        if cached is None or cached[0] != span:
            cached = self._encoded_events[data["agent_id"]] = (span, _dumps(events))
        return f'{_dumps(data)[:-1]},"events":{cached[1]}}}'

    def transcript_path(self, agent_id: str) -> Path:
        return self.transcripts_dir / f"{agent_id}.jsonl"

    def checkpoint(self, agent_id: str, messages: int) -> dict[str, Any]:
        """A continuable checkpoint: the first `messages` lines of the child's transcript."""
        return {"transcript": str(self.transcript_path(agent_id)), "messages": messages}

    def load_transcript(self, agent_id: str) -> list[dict[str, Any]]:
        """Every whole message line; a torn last line (a crash mid-write) is left out."""
        path = self.transcript_path(agent_id)
        messages = []
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.endswith("\n"):
                        break
                    try:
                        message = json.loads(line)
                    except ValueError:
                        break
                    if isinstance(message, dict):
                        messages.append(message)
        except FileNotFoundError:
            return []
        return messages

    def rewrite_transcript(self, agent_id: str, messages: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
        atomic_write_text(self.transcript_path(agent_id), text, mode=FILE_MODE)

    def append_transcript(self, agent_id: str, messages: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(message, ensure_ascii=False) + "\n" for message in messages)
        path = self.transcript_path(agent_id)
        try:
            with open(path, "a", encoding="utf-8", opener=private_opener) as handle:
                handle.write(text)
        except FileNotFoundError:  # the first transcript (or someone removed the folder)
            private_dir(self.transcripts_dir)
            with open(path, "a", encoding="utf-8", opener=private_opener) as handle:
                handle.write(text)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _key(agent: Any, index: int) -> str:
    agent_id = agent.get("agent_id") if isinstance(agent, dict) else None
    return agent_id if isinstance(agent_id, str) else f"#{index}"


def _replay(path: Path, agents: dict[str, Any]) -> None:
    """Apply one journal's lines, in order, to the records read so far (by agent id)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.endswith("\n"):
                    break  # torn by a crash mid-write
                try:
                    change = json.loads(line)
                except ValueError:
                    continue
                if isinstance(change, dict):
                    _apply(change, agents)
    except FileNotFoundError:  # superseded by a snapshot another process just wrote
        return


def _apply(change: dict[str, Any], agents: dict[str, Any]) -> None:
    agent = agents.get(str(change.get("agent_id")))
    if not isinstance(agent, dict):
        return  # a record this snapshot does not hold (another process's)
    fields = change.get("set")
    if isinstance(fields, dict):
        agent.update(fields)
    added = change.get("events")
    if isinstance(added, list) and added:
        events = agent.setdefault("events", [])
        last = events[-1].get("seq", 0) if events else 0
        events.extend(e for e in added if isinstance(e, dict) and e.get("seq", 0) > last)
        del events[:-MAX_EVENTS]


def trim(records: list[WorkerRecord]) -> list[WorkerRecord]:
    """At most MAX_RECORDS, dropping the oldest finished records first."""
    if len(records) <= MAX_RECORDS:
        return records
    excess = len(records) - MAX_RECORDS
    finished = sorted((r for r in records if r.terminal), key=lambda r: r.updated_at_ms)
    dropped = {id(r) for r in finished[:excess]}
    kept = [r for r in records if id(r) not in dropped]
    return kept[-MAX_RECORDS:]
