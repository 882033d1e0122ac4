"""Files on disk for sub-agents: the state file, transcripts and checkpoints.

The state file (`.codewhale/state/subagents.v1.json`) is replaced atomically
under a lock file, so `codewhale agents list` in another process always reads
a whole document. Transcripts are JSONL, appended as messages happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

from codewhale.atomic import atomic_write_text
from codewhale.paths import WorkspacePaths
from codewhale.subagents.records import WorkerRecord

SCHEMA_VERSION = 1
MAX_RECORDS = 256
RESTART_REASON = "Interrupted by process restart"
# How long state-file writes are coalesced: a crash loses at most this much progress;
# terminal states are written at once.
FLUSH_DELAY_SECS = 0.2


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
        # agent_id -> event seq -> encoded JSON; used only by the single writer.
        self._encoded_events: dict[str, dict[int, str]] = {}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.lock_file.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(self.lock_file):
            yield

    def load(self) -> list[WorkerRecord]:
        """Every record in the file; a missing file is an empty list."""
        try:
            text = self.state_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
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
        return [WorkerRecord.from_json(item) for item in document.get("agents", [])]

    def snapshot(self, records: list[WorkerRecord]) -> list[dict[str, Any]]:
        """Plain copies of the records to keep (oldest finished dropped past 256).

        Cheap enough for the event loop; the copies may then be encoded in another thread.
        """
        return [record.to_json() for record in trim(records)]

    def write(self, snapshot: list[dict[str, Any]]) -> None:
        """Encode and atomically replace the file under the lock (blocking: off the loop)."""
        agents = ",".join(self._encode_record(data) for data in snapshot)
        text = f'{{"schema_version":{SCHEMA_VERSION},"agents":[{agents}]}}'
        with self._locked():
            atomic_write_text(self.state_file, text, mode=0o644)

    def _encode_record(self, data: dict[str, Any]) -> str:
        """One record as JSON, reusing the encoding of events already written.

        Events never change once recorded and make up most of the file, so each is
        encoded once; a rewrite then costs roughly the events added since the last one.
        """
        data = dict(data)
        events = data.pop("events")
        cache = self._encoded_events.setdefault(data["agent_id"], {})
        encoded = []
        for event in events:
            text = cache.get(event["seq"])
            if text is None:
                text = cache[event["seq"]] = _dumps(event)
            encoded.append(text)
        if len(cache) > 2 * len(events):  # forget events that fell out of the record
            keep = {event["seq"] for event in events}
            for seq in [seq for seq in cache if seq not in keep]:
                del cache[seq]
        return f'{_dumps(data)[:-1]},"events":[{",".join(encoded)}]}}'

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
        atomic_write_text(self.transcript_path(agent_id), text, mode=0o644)

    def append_transcript(self, agent_id: str, messages: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(message, ensure_ascii=False) + "\n" for message in messages)
        path = self.transcript_path(agent_id)
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(text)
        except FileNotFoundError:  # the first transcript (or someone removed the folder)
            self.transcripts_dir.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(text)


class CoalescedWriter:
    """Writes the state file at most once per delay, off the event loop; or now, durably.

    Every change in the window rides along with the next write; `enabled` is asked
    each time so a manager can stop writing (e.g. after finding a file it must not touch).
    Writes never overlap: one lock orders the background writes and `durable()`.
    """

    def __init__(
        self,
        store: SubagentStore,
        records: Callable[[], list[WorkerRecord]],
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.records = records
        self.enabled = enabled
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        self._lock = asyncio.Lock()
        # Tickets of `durable()` callers, and the last ticket a finished write covered.
        self._requested = 0
        self._written_through = 0

    def mark_dirty(self, delay: float = FLUSH_DELAY_SECS) -> None:
        if not self.enabled():
            return
        self._dirty = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write_later(delay))

    async def durable(self) -> None:
        """Return once the state as it is now is on disk (written whole and fsync'd).

        For what the model is about to be told (a new child's id): several callers at
        once share a write; one arriving during a write waits for the next.
        """
        if not self.enabled():
            return
        self._requested += 1
        await self._write(ticket=self._requested)

    async def _write_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        # A change marked while a write is in flight gets a write of its own.
        while self._dirty:
            self._dirty = False
            await self._write()
            if self._dirty:
                await asyncio.sleep(FLUSH_DELAY_SECS)

    async def _write(self, ticket: int = 0) -> None:
        async with self._lock:
            if ticket and self._written_through >= ticket:
                return  # a write that started after this caller asked has finished
            through = self._requested
            snapshot = self.store.snapshot(self.records())
            # Encoding and the write (with its fsync) run in a thread so children keep
            # streaming.
            await asyncio.to_thread(self.store.write, snapshot)
            self._written_through = through

    async def flush(self) -> None:
        """Write the current state now (after any write already in flight)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.enabled():
            await self._write()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def trim(records: list[WorkerRecord]) -> list[WorkerRecord]:
    """At most MAX_RECORDS, dropping the oldest finished records first."""
    if len(records) <= MAX_RECORDS:
        return records
    excess = len(records) - MAX_RECORDS
    finished = sorted((r for r in records if r.terminal), key=lambda r: r.updated_at_ms)
    dropped = {id(r) for r in finished[:excess]}
    kept = [r for r in records if id(r) not in dropped]
    return kept[-MAX_RECORDS:]
