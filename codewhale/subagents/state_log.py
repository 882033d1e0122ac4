"""When the sub-agent state reaches the disk: journal lines for changes, snapshots at times.

Children stream: their records change many times a second. Rewriting every record
for each change cost the event loop in proportion to all records; here a change
costs in proportion to itself. Changes are coalesced over FLUSH_DELAY_SECS and
appended to the journal as one line per changed record (its changed fields and
new events), written on the loop without fsync. The snapshot (the whole state
file, fsync'd, written off the loop) is rewritten, and the journal restarted,
when a record is new or changes status (readers of the bare file see every
record and its status), when the journal has outgrown the snapshot (so reading
stays proportional to the state), when a caller needs the state durable
(`durable()`, before the model hears a new child's id), and on `flush()`.

A write the disk refuses (full, read-only, file too large) is reported once
(`on_failure`) and never stops a child: the changes stay pending and go with the
next write, which waits RETRY_SECS; `durable()` raises it, as its caller promised
the model something the disk could not keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codewhale.subagents.records import TERMINAL, WorkerRecord
from codewhale.subagents.state.reading import MAX_LINE_BYTES
from codewhale.subagents.store import StateWriteError, SubagentStore, Written

# How long changes are coalesced: a crash of the process loses at most this much progress.
FLUSH_DELAY_SECS = 0.2
# The journal may grow to the snapshot's size (at least this) before a compaction.
MIN_JOURNAL_BYTES = 256 * 1024
# After a failed write, how long the next one waits (the disk may have room again).
RETRY_SECS = 5.0


@dataclass
class _Written:
    """What the files hold of one record: its fields (events aside) and last event.

    A finished record keeps only a digest of its fields: it rarely changes again, and a
    long session holds hundreds of them (a copy of each cost ~8 KB a child). When one
    does change, its journal line sets every field.
    """

    status: str
    last_seq: int
    fields: dict[str, Any] | None
    digest: bytes = b""

    @classmethod
    def of(cls, data: dict[str, Any], last_seq: int) -> _Written:
        """The baseline for a record's JSON `data` (events aside)."""
        if data["status"] in TERMINAL:
            return cls(data["status"], last_seq, None, _digest(data))
        return cls(data["status"], last_seq, data)

    def changes(self, data: dict[str, Any]) -> dict[str, Any]:
        """The fields of `data` that differ from what the files hold."""
        if self.fields is None:
            return {} if _digest(data) == self.digest else data
        before = self.fields
        return {key: value for key, value in data.items() if before.get(key, _ABSENT) != value}


def _digest(data: dict[str, Any]) -> bytes:
    encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.blake2b(encoded.encode(), digest_size=16).digest()


class CoalescedWriter:
    """Keeps the state on disk current, at most once per delay; or now, durably.

    Every change in the window rides along with the next write; `enabled` is asked
    each time so a manager can stop writing (e.g. after finding a file it must not
    touch). Writes never overlap: one lock orders journal appends, snapshots and
    `durable()`.
    """

    def __init__(
        self,
        store: SubagentStore,
        records: Callable[[], list[WorkerRecord]],
        enabled: Callable[[], bool] = lambda: True,
        on_failure: Callable[[StateWriteError], None] = lambda error: None,
        on_warning: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.store = store
        self.records = records
        self.enabled = enabled
        # Told of the first failed write of a run of them, and of damage set aside.
        self.on_failure = on_failure
        self.on_warning = on_warning
        # The last write's failure, until a write succeeds again.
        self.failure: StateWriteError | None = None
        self._retry_at = 0.0
        # The scheduled write is still waiting (not writing): safe to cancel.
        self._pausing = False
        self._task: asyncio.Task[None] | None = None
        # Records changed since the last write, by id; `_everything`: a change not
        # tied to one record, so every record is looked at.
        self._dirty: dict[str, WorkerRecord] = {}
        self._everything = False
        self._lock = asyncio.Lock()
        # Tickets of `durable()` callers, and the last ticket a finished write covered.
        self._requested = 0
        self._written_through = 0
        # Since the last snapshot: each record as the files hold it, the ids the snapshot
        # left out (trimmed), the journal's generation (None: no snapshot written yet)
        # and size, and the snapshot's size.
        self._written: dict[str, _Written] = {}
        self._left_out: set[str] = set()
        self._generation: int | None = None
        self._journal_bytes = 0
        self._snapshot_bytes = 0

    def mark_dirty(
        self, record: WorkerRecord | None = None, delay: float = FLUSH_DELAY_SECS
    ) -> None:
        """`record` changed (None: something did); written within `delay` seconds."""
        if record is None:
            self._everything = True
        else:
            self._dirty[record.agent_id] = record
        # Per event while children stream: a write already coming needs nothing more.
        if self._task is not None and not self._task.done():
            return
        if not self.enabled():
            self._dirty.clear()
            self._everything = False
            return
        loop = asyncio.get_running_loop()
        delay = max(delay, self._retry_at - loop.time())
        self._task = loop.create_task(self._write_later(delay))

    async def durable(self) -> None:
        """Return once the state as it is now is on disk (a snapshot, fsync'd).

        For what the model is about to be told (a new child's id): several callers at
        once share a write; one arriving during a write waits for the next. Raises
        StateWriteError.
        """
        if not self.enabled():
            return
        self._requested += 1
        await self._write(ticket=self._requested, compact=True)

    async def flush(self) -> None:
        """Write the current state as a snapshot now (after any write already in flight);
        a failure is reported (`failure`), not raised: it comes as a run ends."""
        if self._task is not None:
            if self._pausing:
                self._task.cancel()  # this write takes its changes now
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.enabled():
            with contextlib.suppress(StateWriteError):
                await self._write(compact=True)
            self.store.close_journal()

    async def _write_later(self, delay: float) -> None:
        await self._pause(delay)
        # A change marked while a write is in flight gets a write of its own.
        while self._dirty or self._everything:
            try:
                await self._write()
            except StateWriteError:
                return  # reported; the next change (after RETRY_SECS) or flush tries again
            if self._dirty or self._everything:
                await self._pause(FLUSH_DELAY_SECS)

    async def _pause(self, delay: float) -> None:
        """Wait before a write; `flush()` may cut this short (never a write under way)."""
        self._pausing = True
        try:
            await asyncio.sleep(delay)
        finally:
            self._pausing = False

    async def _write(self, ticket: int = 0, compact: bool = False) -> None:
        async with self._lock:
            if ticket and self._written_through >= ticket:
                return  # a write that started after this caller asked has finished
            through = self._requested
            if not self.enabled():
                return
            changed = self._take_changes()
            try:
                if compact or self._compaction_due(changed) or not self._append(changed):
                    await self._compact()
            except StateWriteError as error:
                self._failed(error)
                raise
            self._written_through = through
            self.failure = None
            for warning in self.store.warnings:
                self.on_warning(warning)
            self.store.warnings.clear()

    def _failed(self, error: StateWriteError) -> None:
        """Keep every change for the next write, which starts a new snapshot later."""
        self._everything = True
        self._generation = None  # an append may have left half a line: a new journal
        self._retry_at = asyncio.get_running_loop().time() + RETRY_SECS
        if self.failure is None:
            self.on_failure(error)
        self.failure = error

    def _take_changes(self) -> list[WorkerRecord]:
        changed = self.records() if self._everything else list(self._dirty.values())
        self._dirty.clear()
        self._everything = False
        return changed

    def _compaction_due(self, changed: list[WorkerRecord]) -> bool:
        if self._generation is None:
            return True
        if self._journal_bytes > max(MIN_JOURNAL_BYTES, self._snapshot_bytes):
            return True
        for record in changed:
            written = self._written.get(record.agent_id)
            if written is None:
                # New, or trimmed from the snapshot as finished and now running again.
                if record.agent_id not in self._left_out or not record.terminal:
                    return True
            elif written.status != record.status:
                return True
        return False

    async def _compact(self) -> None:
        """Write every record as a new snapshot (merged with the disk's) and start its
        journal."""
        # Taken on the loop, so no change can slip between the copy and the baseline.
        # A finished record the state file no longer keeps (trimmed as old) is not offered
        # again: it would be trimmed again, and its copies would grow with the session.
        snapshot = self.store.snapshot(
            [r for r in self.records() if not (r.terminal and r.agent_id in self._left_out)]
        )
        self._generation = None  # until the snapshot has landed
        # The baseline, reading the disk, merging, encoding and the write (with its
        # fsync) run in a thread so children keep streaming.
        written, result = await asyncio.to_thread(self._write_snapshot, snapshot)
        self._written = {key: value for key, value in written.items() if key in result.kept}
        self._left_out = (self._left_out | set(written)) - result.kept
        self._generation, self._journal_bytes = result.generation, 0
        self._snapshot_bytes = result.size

    def _write_snapshot(
        self, snapshot: list[dict[str, Any]]
    ) -> tuple[dict[str, _Written], Written]:
        written: dict[str, _Written] = {}
        for data in snapshot:
            events = data["events"]
            fields = {key: value for key, value in data.items() if key != "events"}
            written[data["agent_id"]] = _Written.of(fields, events[-1]["seq"] if events else 0)
        return written, self.store.write(snapshot)

    def _append(self, changed: list[WorkerRecord]) -> bool:
        """Append the changes as journal lines; False if one is too large for a line."""
        assert self._generation is not None
        lines = [line for record in changed if (line := self._change_line(record))]
        if any(len(line) > MAX_LINE_BYTES // 4 for line in lines):
            return False  # at most 4 bytes a character: fold it into a snapshot instead
        if lines:
            self._journal_bytes += self.store.append_journal(self._generation, lines)
        return True

    def _change_line(self, record: WorkerRecord) -> str:
        """One journal line: the record's fields that changed and its new events ("": none)."""
        written = self._written.get(record.agent_id)
        if written is None:
            return ""  # left out of the snapshot (trimmed): not kept on disk
        data = record.to_json()
        events = data.pop("events")
        changed = written.changes(data)
        start = len(events)
        while start and events[start - 1]["seq"] > written.last_seq:
            start -= 1
        if not changed and start == len(events):
            return ""
        self._written[record.agent_id] = _Written.of(data, events[-1]["seq"] if events else 0)
        change: dict[str, Any] = {"agent_id": record.agent_id, "set": changed}
        if start < len(events):
            change["events"] = events[start:]
        return json.dumps(change, ensure_ascii=False, separators=(",", ":"))


_ABSENT = object()
