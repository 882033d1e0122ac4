"""Reading the state file and its journals as they are on disk, damage and all.

The snapshot (`subagents.v1.json`) holds every record and names the journals that
continue it, each with the offset up to which it is already folded in and the process
that appends to it. A reader replays each journal from that offset. What cannot be
read is never fatal: a record of the wrong shape, a line that is not JSON or is
absurdly long, bytes that are not UTF-8, a file cut short; each is skipped, noted as
damage (with the file it was in), and the records around it are kept. Only a file
written by a newer CodeWhale (a higher `schema_version`) is refused, untouched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.subagents.records import MAX_EVENTS, WorkerRecord
from codewhale.subagents.state.owners import Owner

SCHEMA_VERSION = 1
# Longest journal line read; a longer one is garbage (the writer folds a change this
# large into the snapshot instead of appending it).
MAX_LINE_BYTES = 4 * 1024 * 1024
# How much of an over-long line is held at a time while skipping it.
_SKIP_CHUNK = 1024 * 1024
# Where a record starts in text that no longer parses as a whole (its first field).
_RECORD_START = re.compile(r'\{\s*"run_id"\s*:')


class StateFileError(Exception):
    """A state file we must not touch (a newer schema version, or unreadable)."""


@dataclass(frozen=True)
class StateFiles:
    """Where the snapshot is and how its journals are named beside it."""

    snapshot: Path

    def journal(self, generation: int) -> Path:
        return self.snapshot.with_name(f"{self.snapshot.stem}.journal.{generation}")

    def journals_on_disk(self) -> list[tuple[int, Path]]:
        """Every journal file, oldest generation first."""
        found = []
        for path in self.snapshot.parent.glob(f"{self.snapshot.stem}.journal.*"):
            suffix = path.name.rsplit(".", 1)[1]
            if suffix.isdigit():
                found.append((int(suffix), path))
        return sorted(found)


@dataclass(frozen=True)
class JournalEntry:
    """A journal the snapshot continues into: from `offset` on, its lines are newer."""

    generation: int
    offset: int
    # The process appending to it and which of its stores (None: an older version's).
    owner: Owner | None = None
    writer: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"generation": self.generation, "offset": self.offset}
        if self.owner is not None:
            data.update(self.owner.to_json(), writer=self.writer)
        return data


@dataclass
class DiskState:
    """The records on disk (snapshot plus journals, each checked) and how to go on."""

    # Valid records by id, each in the normalised form WorkerRecord.to_json() gives.
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The journals that continue the snapshot, with the offsets now folded in.
    journals: list[JournalEntry] = field(default_factory=list)
    # The newest generation the snapshot names (a new one must be newer still).
    generation: int = 0
    # What could not be read, by file: a few words on each problem.
    damage: dict[Path, list[str]] = field(default_factory=dict)

    def note(self, path: Path, problem: str) -> None:
        self.damage.setdefault(path, []).append(problem)


def read_state(files: StateFiles, skip_writer: str = "") -> DiskState:
    """The snapshot with its journals replayed (`skip_writer`'s own journal left out).

    Raises StateFileError for a file of a newer schema version or one that cannot be
    read at all.
    """
    state = DiskState()
    try:
        raw = files.snapshot.read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError as error:
        raise StateFileError(f"{files.snapshot}: cannot be read ({error.strerror})") from None
    document = _parse_snapshot(raw, files.snapshot, state) if raw else {}
    for data in _records_of(document, raw, files.snapshot, state):
        _add_record(state, data, files.snapshot)
    for entry in _journals_named(document, files, state):
        if skip_writer and entry.writer == skip_writer:
            state.journals.append(entry)
        else:
            state.journals.append(replay(files.journal(entry.generation), entry, state))
    return state


def _add_record(state: DiskState, data: object, path: Path) -> None:
    """Keep `data` if it is a valid record (the newest of two with one id)."""
    # Imported on first use: building the model costs a start without records nothing.
    from codewhale.subagents.state.schema import record_problem

    problem = record_problem(data)
    if problem is not None:
        state.note(path, problem)
        return
    assert isinstance(data, dict)
    record = WorkerRecord.from_json(data).to_json()
    known = state.agents.get(record["agent_id"])
    if known is None or known["updated_at_ms"] <= record["updated_at_ms"]:
        state.agents[record["agent_id"]] = record


def _parse_snapshot(raw: bytes, path: Path, state: DiskState) -> Any:
    """The snapshot's JSON value (None where it does not parse as a whole)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        state.note(path, f"bytes that are not UTF-8 at offset {error.start}")
        text = raw.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        state.note(path, f"not valid JSON ({error})")
        return None
    if not isinstance(document, dict):
        state.note(path, "the file must hold a JSON object")
        return None
    version = document.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise StateFileError(
            f"{path}: schema_version {version} is not supported "
            f"(this CodeWhale reads version {SCHEMA_VERSION}); the file was left untouched"
        )
    if version != SCHEMA_VERSION:
        state.note(path, f"schema_version {version!r} instead of {SCHEMA_VERSION}")
    return document


def _records_of(document: Any, raw: bytes, path: Path, state: DiskState) -> list[Any]:
    """The snapshot's records; what can be salvaged when it does not parse as a whole."""
    if isinstance(document, dict):
        agents = document.get("agents", [])
        if isinstance(agents, list):
            return agents
        state.note(path, "'agents' must be a list of records")
    found = list(_salvaged(raw.decode("utf-8", errors="replace")))
    state.note(path, f"{len(found)} whole records recovered from it")
    return found


def _salvaged(text: str) -> Iterator[Any]:
    """Every whole record in a damaged text: each JSON object that starts as one does."""
    decoder = json.JSONDecoder()
    end = 0
    for match in _RECORD_START.finditer(text):
        if match.start() < end:
            continue  # inside the record just read
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        yield value


def _journals_named(document: Any, files: StateFiles, state: DiskState) -> list[JournalEntry]:
    """The journals to replay: those the snapshot lists (or, in an older version's file,
    every journal from the generation it names on; older ones were folded in)."""
    named = document.get("journals") if isinstance(document, dict) else None
    generation = document.get("journal") if isinstance(document, dict) else None
    if not isinstance(generation, int) or isinstance(generation, bool):
        generation = 0
    state.generation = generation
    if not isinstance(named, list):
        on_disk = [number for number, _ in files.journals_on_disk() if number >= generation]
        state.generation = max([generation, *on_disk])
        return [JournalEntry(number, 0) for number in on_disk]
    entries = []
    for item in named:
        entry = _entry(item)
        if entry is not None:
            entries.append(entry)
            state.generation = max(state.generation, entry.generation)
    return entries


def _entry(item: object) -> JournalEntry | None:
    if not isinstance(item, dict):
        return None
    generation, offset = item.get("generation"), item.get("offset")
    pid, start, writer = item.get("owner_pid"), item.get("owner_start"), item.get("writer")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (generation, offset)):
        return None
    assert isinstance(generation, int) and isinstance(offset, int)
    owner = None
    if isinstance(pid, int) and (start is None or isinstance(start, str)):
        owner = Owner(pid, start)
    return JournalEntry(generation, offset, owner, writer if isinstance(writer, str) else "")


def replay(path: Path, entry: JournalEntry, state: DiskState) -> JournalEntry:
    """Apply a journal's lines after `entry.offset` to the records; the entry moved past
    its last whole line (a torn last line is an append still under way, not damage)."""
    offset = entry.offset
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return entry  # nothing appended yet (or folded and removed by its owner)
    except OSError as error:
        state.note(path, f"cannot be read ({error.strerror})")
        return entry
    touched: dict[str, dict[str, Any]] = {}
    with handle:
        handle.seek(offset)
        while True:
            line = handle.readline(MAX_LINE_BYTES + 1)
            if not line.endswith(b"\n"):
                if len(line) <= MAX_LINE_BYTES:
                    break  # torn: the end of what has been written so far
                # Garbage (no change is this long): skipped, to the end of the file if
                # no line ends it, so what its writer appends next is read after it.
                ended = _skip_rest_of_line(handle)
                state.note(path, f"a line longer than {MAX_LINE_BYTES} bytes")
                offset = handle.tell()
                if not ended:
                    break
                continue
            offset += len(line)
            problem = _apply_line(line, state, touched)
            if problem:
                state.note(path, problem)
    _check_replayed(state, touched, path)
    return JournalEntry(entry.generation, offset, entry.owner, entry.writer)


def _skip_rest_of_line(handle: Any) -> bool:
    """Read past the end of an over-long line; False if the file ends first (torn)."""
    while True:
        chunk = handle.readline(_SKIP_CHUNK)
        if not chunk:
            return False
        if chunk.endswith(b"\n"):
            return True


def _apply_line(line: bytes, state: DiskState, touched: dict[str, dict[str, Any]]) -> str | None:
    """Apply one change line; why it could not be (None: applied, or for no record here)."""
    try:
        change = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # RecursionError: nested past Python's limit
        return "a line that is not JSON"
    if not isinstance(change, dict) or not isinstance(change.get("agent_id"), str):
        return "a line that is not a change of a record"
    fields, added = change.get("set", {}), change.get("events", [])
    if not isinstance(fields, dict) or not isinstance(added, list):
        return f"a change of {change['agent_id']:.40} of the wrong shape"
    agent = state.agents.get(change["agent_id"])
    if agent is None:
        return None  # a record this snapshot does not hold (trimmed, or never valid)
    touched.setdefault(change["agent_id"], agent)
    # A new dict, never an update in place: the store keeps what it last read as a base.
    agent = {**agent, **fields}
    events = list(agent.get("events") or [])
    last = events[-1].get("seq", 0) if events and isinstance(events[-1], dict) else 0
    for event in added:
        if isinstance(event, dict) and isinstance(event.get("seq"), int) and event["seq"] > last:
            events.append(event)
            last = event["seq"]
    agent["events"] = events[-MAX_EVENTS:]
    state.agents[change["agent_id"]] = agent
    return None


def _check_replayed(state: DiskState, touched: dict[str, dict[str, Any]], path: Path) -> None:
    """Records the journal changed are checked again; one it broke stays as it was."""
    if not touched:
        return
    from codewhale.subagents.state.schema import record_problem

    for agent_id, before in touched.items():
        problem = record_problem(state.agents[agent_id])
        if problem is not None:
            state.note(path, problem)
            state.agents[agent_id] = before
