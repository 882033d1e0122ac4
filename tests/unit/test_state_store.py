"""The state file shared by processes: merging, journals of others, owners, validation."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from codewhale.subagents.lifecycle import ChildState, apply_move, reconcile_dead_owners
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.state.owners import this_process
from codewhale.subagents.state.schema import StoredRecord
from codewhale.subagents.state_log import CoalescedWriter
from codewhale.subagents.store import SubagentStore
from tests.support.records import bare_file, coalesced, started, step


def by_id(store: SubagentStore) -> dict[str, WorkerRecord]:
    return {record.agent_id: record for record in store.load()}


def test_a_stale_copy_never_overwrites_what_another_process_moved_on(tmp_path):
    first = SubagentStore(tmp_path)
    first.write(first.snapshot([started(0)]))
    # Two runs load the record; the second finishes it.
    stale, second = SubagentStore(tmp_path), SubagentStore(tmp_path)
    stale_records, moved = stale.load(), second.load()
    apply_move(moved[0], ChildState.COMPLETED, "completed")
    second.write(second.snapshot(moved))
    # The first writes its own new child beside its unchanged (now stale) copy.
    stale.write(stale.snapshot([*stale_records, started(1)]))
    second.write(second.snapshot(moved))  # and the second writes again, not knowing it
    statuses = {r.agent_id: r.status for r in SubagentStore(tmp_path).load()}
    assert statuses == {started(0).agent_id: "completed", started(1).agent_id: "running"}


def test_a_change_made_here_is_kept_unless_the_other_is_newer(tmp_path):
    store = SubagentStore(tmp_path)
    store.write(store.snapshot([started(0), started(1)]))
    here, there = SubagentStore(tmp_path), SubagentStore(tmp_path)
    mine, theirs = here.load(), there.load()
    # Both change both records; record 0 last here, record 1 last there.
    apply_move(theirs[0], ChildState.FAILED, "failed there")
    apply_move(mine[1], ChildState.CANCELLED, "cancelled here")
    apply_move(mine[0], ChildState.COMPLETED, "completed here")
    apply_move(theirs[1], ChildState.COMPLETED, "completed there")
    mine[0].updated_at_ms = theirs[0].updated_at_ms + 1
    theirs[1].updated_at_ms = mine[1].updated_at_ms + 1
    there.write(there.snapshot(theirs))
    here.write(here.snapshot(mine))
    events = [r.events[-1]["message"] for r in SubagentStore(tmp_path).load()]
    assert events == ["completed here", "completed there"]


def test_fields_a_newer_version_added_are_written_back(tmp_path):
    store = SubagentStore(tmp_path)
    data = {**started(0).to_json(), "priority": "high", "labels": ["a"]}
    store.state_file.parent.mkdir(parents=True)
    store.state_file.write_text(json.dumps({"schema_version": 1, "agents": [data]}))
    records = store.load()
    apply_move(records[0], ChildState.COMPLETED, "completed")
    store.write(store.snapshot(records))
    (written,) = bare_file(store)["agents"]
    assert (written["priority"], written["labels"], written["status"]) == (
        "high",
        ["a"],
        "completed",
    )
    assert store.warnings == []


async def test_another_live_writers_journal_is_kept_and_read_after_the_snapshot(tmp_path):
    mine, theirs = [started(0)], [started(1)]
    here, there = SubagentStore(tmp_path), SubagentStore(tmp_path)
    writer_here = CoalescedWriter(here, lambda: mine)
    writer_there = CoalescedWriter(there, lambda: theirs)
    await writer_there.durable()
    await writer_here.durable()
    step(theirs[0], "grep_files")
    writer_there.mark_dirty(theirs[0], 0)
    await coalesced(writer_there)
    # A snapshot here folds their journal in and keeps it (their process lives) ...
    step(mine[0], "read_file")
    await writer_here.durable()
    generation = writer_there._generation
    assert generation is not None
    listed = {e["generation"]: e["offset"] for e in bare_file(here)["journals"]}
    assert listed[generation] == there.journal_path(generation).stat().st_size
    # ... and what they append next is read after it.
    step(theirs[0], "list_dir")
    writer_there.mark_dirty(theirs[0], 0)
    await coalesced(writer_there)
    loaded = by_id(SubagentStore(tmp_path))
    assert loaded[theirs[0].agent_id].steps_taken == 2
    assert loaded[mine[0].agent_id].steps_taken == 1


JOURNAL_OF_AN_EXITED_PROCESS = """
import asyncio, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from codewhale.subagents.state.owners import this_process
from codewhale.subagents.state_log import CoalescedWriter
from codewhale.subagents.store import SubagentStore
from tests.support.records import started, step

async def main():
    records = [started(7)]
    records[0].owner_pid, records[0].owner_start = this_process().pid, this_process().start
    writer = CoalescedWriter(SubagentStore(Path({workspace!r})), lambda: records)
    await writer.durable()
    step(records[0], "grep_files")
    writer.mark_dirty(records[0], 0)
    await writer._task

asyncio.run(main())
"""


def test_the_journal_of_an_exited_process_is_folded_in_and_removed(tmp_path):
    root = str(Path(__file__).resolve().parents[2])
    script = JOURNAL_OF_AN_EXITED_PROCESS.format(root=root, workspace=str(tmp_path))
    subprocess.run([sys.executable, "-c", script], check=True)
    store = SubagentStore(tmp_path)
    (journal,) = store.state_file.parent.glob("*.journal.*")
    # Its record is running still, and its process gone: interrupted on loading.
    (record,) = reconcile_dead_owners(store.load())
    assert record.status == "interrupted" and record.steps_taken == 1
    store.write(store.snapshot([record]))
    assert not journal.exists()
    assert [e["owner_pid"] for e in bare_file(store)["journals"]] == [os.getpid()]


def test_only_records_of_processes_that_are_gone_are_interrupted():
    mine, reused, older = started(0), started(1), started(2)
    owner = this_process()
    mine.owner_pid, mine.owner_start = owner.pid, owner.start
    # This pid, but a process started at another time: the owner is gone, the pid reused.
    reused.owner_pid, reused.owner_start = owner.pid, "another-boot:42"
    # A record of an older version, with no start token: the pid alone decides.
    older.owner_pid = owner.pid
    reconcile_dead_owners([mine, reused, older])
    statuses = [mine.status, reused.status, older.status]
    assert statuses == ["running", "interrupted" if owner.start else "running", "running"]


def test_the_record_model_covers_every_field_of_a_record():
    fields = {field.name for field in dataclasses.fields(WorkerRecord)} - {"extra"}
    assert set(StoredRecord.model_fields) == fields


def test_a_transcript_is_read_up_to_its_first_damaged_line(tmp_path):
    store = SubagentStore(tmp_path)
    first = {"role": "user", "content": "survey the parser"}
    store.append_transcript("agent_x", [first, {"role": 7}, {"role": "user", "content": "x"}])
    # What follows a damaged message is left out: the conversation sent again is whole.
    assert store.load_transcript("agent_x") == [first]


def test_a_journal_line_nested_past_pythons_limit_is_skipped(tmp_path):
    store = SubagentStore(tmp_path)
    store.write(store.snapshot([started(0)]))
    generation = bare_file(store)["journal"]
    change = {"agent_id": started(0).agent_id, "set": {"activity": "after it"}}
    store.journal_path(generation).write_text("[" * 100_000 + "\n" + json.dumps(change) + "\n")
    reader = SubagentStore(tmp_path)
    (record,) = reader.load()
    assert record.activity == "after it"
    assert len(reader.warnings) == 1 and "a line that is not JSON" in reader.warnings[0]
