"""The sub-agent state on disk: journal lines between snapshots, replayed by every reader."""

from __future__ import annotations

import json
import subprocess
import sys

from codewhale.subagents.lifecycle import ChildState, apply_move
from codewhale.subagents.state.merge import MAX_RECORDS
from codewhale.subagents.state_log import CoalescedWriter
from codewhale.subagents.store import SubagentStore
from tests.support.records import bare_file, coalesced, record, started, step
from tests.support.settings import app_environment


def journals(store: SubagentStore) -> list[str]:
    return sorted(path.name for path in store.state_file.parent.glob("*.journal.*"))


async def test_changes_go_to_the_journal_and_every_reader_replays_them(tmp_path):
    store = SubagentStore(tmp_path)
    records = [started(n) for n in range(3)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    snapshot = bare_file(store)
    for n in range(5):
        step(records[1], f"tool_{n}")
        writer.mark_dirty(records[1], 0)
        await coalesced(writer)
    # The snapshot stayed as it was; the changes are journal lines.
    assert bare_file(store) == snapshot
    assert journals(store) == [f"subagents.v1.journal.{snapshot['journal']}"]
    # Another process (a new store) reads the current records.
    loaded = {r.agent_id: r for r in SubagentStore(tmp_path).load()}
    assert [r.to_json() for r in loaded.values()] == [r.to_json() for r in records]
    assert loaded[records[1].agent_id].steps_taken == 5


async def test_a_change_appends_only_itself_however_many_records(tmp_path):
    store = SubagentStore(tmp_path)
    records = [started(n) for n in range(200)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    snapshot_size = store.state_file.stat().st_size
    step(records[7], "grep_files")
    writer.mark_dirty(records[7], 0)
    await coalesced(writer)
    (journal,) = store.state_file.parent.glob("*.journal.*")
    line = json.loads(journal.read_text())
    assert line["agent_id"] == records[7].agent_id
    assert {"event_seq", "steps_taken", "usage"} <= set(line["set"])
    assert set(line["set"]) <= {"event_seq", "steps_taken", "usage", "updated_at_ms"}
    assert [event["status"] for event in line["events"]] == ["running_tool", "running"]
    assert journal.stat().st_size < 1000 < snapshot_size // 100


async def test_a_status_change_rewrites_the_snapshot_and_drops_the_journal(tmp_path):
    store = SubagentStore(tmp_path)
    records = [started(n) for n in range(2)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    step(records[0], "read_file")
    writer.mark_dirty(records[0], 0)
    await coalesced(writer)
    assert journals(store)
    records[0].result = "SUMMARY: done"
    apply_move(records[0], ChildState.COMPLETED, "completed")
    writer.mark_dirty(records[0], 0)
    await coalesced(writer)
    agents = bare_file(store)["agents"]
    assert [a["status"] for a in agents] == ["completed", "running"]
    assert agents[0]["result"] == "SUMMARY: done" and agents[0]["steps_taken"] == 1
    assert journals(store) == []


async def test_a_new_record_is_in_the_bare_file_once_durable(tmp_path):
    store = SubagentStore(tmp_path)
    records = [started(0)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    records.append(record(1))
    records[1].add_event("queued", "queued")
    await writer.durable()
    assert [a["agent_id"] for a in bare_file(store)["agents"]] == [r.agent_id for r in records]


async def test_flush_leaves_the_snapshot_alone(tmp_path):
    store = SubagentStore(tmp_path)
    records = [started(n) for n in range(2)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    step(records[1], "grep_files")
    writer.mark_dirty(records[1], 0)
    await coalesced(writer)
    await writer.flush()
    assert journals(store) == []
    assert bare_file(store)["agents"][1]["steps_taken"] == 1


async def test_the_journal_is_folded_in_once_it_outgrows_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr("codewhale.subagents.state_log.MIN_JOURNAL_BYTES", 0)
    store = SubagentStore(tmp_path)
    records = [started(0)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    generation = bare_file(store)["journal"]
    size = store.state_file.stat().st_size
    journal = store.journal_path(generation)
    sizes = [0]
    while bare_file(store)["journal"] == generation:
        sizes.append(journal.stat().st_size if journal.exists() else 0)
        step(records[0], "x" * 200)
        writer.mark_dirty(records[0], 0)
        await coalesced(writer)
    # Folded in once it passed the snapshot's size: reading stays proportional to the state.
    assert sizes[-2] <= size < sizes[-1] < size + 1000
    assert bare_file(store)["agents"][0]["steps_taken"] == len(sizes) - 1
    assert not journal.exists()


async def test_events_beyond_the_cap_are_dropped_on_replay_too(tmp_path):
    store = SubagentStore(tmp_path)
    records = [started(0)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    for n in range(100):
        step(records[0], f"tool_{n}")
        writer.mark_dirty(records[0], 0)
        await coalesced(writer)
    (loaded,) = SubagentStore(tmp_path).load()
    assert len(loaded.events) == 128
    assert loaded.events == records[0].events


def write_state(store: SubagentStore, generation: int, agents: list[dict]) -> None:
    store.state_file.parent.mkdir(parents=True, exist_ok=True)
    document = {"schema_version": 1, "journal": generation, "agents": agents}
    store.state_file.write_text(json.dumps(document))


def test_older_journals_left_by_a_crash_are_ignored_newer_ones_replayed(tmp_path):
    store = SubagentStore(tmp_path)
    one = started(0).to_json()
    write_state(store, 5, [one])

    def change(**fields) -> str:
        return json.dumps({"agent_id": one["agent_id"], "set": fields}) + "\n"

    # Generation 4 was folded into the snapshot before the crash; 5 and 6 came after it
    # (a crash while snapshot 6 was being written).
    store.journal_path(4).write_text(change(steps_taken=99, activity="stale"))
    store.journal_path(5).write_text(change(steps_taken=3))
    # The last line was torn by the crash: half a line, no newline.
    store.journal_path(6).write_text(change(activity="step 4") + '{"agent_id": "')
    (loaded,) = SubagentStore(tmp_path).load()
    assert (loaded.steps_taken, loaded.activity) == (3, "step 4")


async def test_a_writer_continues_after_what_it_loaded(tmp_path):
    first = SubagentStore(tmp_path)
    records = [started(0)]
    writer = CoalescedWriter(first, lambda: records)
    await writer.durable()
    step(records[0], "grep_files")
    writer.mark_dirty(records[0], 0)
    await coalesced(writer)
    # The next session: its first write is a snapshot newer than anything on disk.
    generation = bare_file(first)["journal"]
    second = SubagentStore(tmp_path)
    reloaded = second.load()
    await CoalescedWriter(second, lambda: reloaded).durable()
    assert bare_file(second)["journal"] > generation
    assert bare_file(second)["agents"][0]["steps_taken"] == 1
    # The first store's process still runs: its journal stays, listed as folded in.
    journal = first.journal_path(generation)
    listed = {e["generation"]: e["offset"] for e in bare_file(second)["journals"]}
    assert listed[generation] == journal.stat().st_size


async def test_agents_list_in_another_process_sees_journaled_progress(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    store = SubagentStore(workspace)
    records = [started(0)]
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    for n in range(3):
        step(records[0], f"tool_{n}")
    writer.mark_dirty(records[0], 0)
    await coalesced(writer)
    assert bare_file(store)["agents"][0]["steps_taken"] == 0
    listed = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", "list", "--json", "-C", str(workspace)],
        capture_output=True,
        text=True,
        env=app_environment(CODEWHALE_HOME=str(tmp_path / "home")),
        check=True,
    )
    (agent,) = json.loads(listed.stdout)["agents"]
    assert agent["steps_taken"] == 3 and agent["usage"]["input"] == 3000


async def test_finished_records_trimmed_from_the_file_are_not_copied_again(tmp_path):
    """Over a long session the file keeps MAX_RECORDS; the finished records beyond it stay
    in memory only, and later snapshots neither write nor copy them (issue 27's RSS)."""
    store = SubagentStore(tmp_path)
    records = [started(n) for n in range(MAX_RECORDS + 40)]
    for each in records[:60]:
        apply_move(each, ChildState.COMPLETED, "done")
    records[0].updated_at_ms -= 10_000  # the oldest finished ones are trimmed first
    writer = CoalescedWriter(store, lambda: records)
    await writer.durable()
    on_disk = {agent["agent_id"] for agent in bare_file(store)["agents"]}
    assert len(on_disk) == MAX_RECORDS
    trimmed = {r.agent_id for r in records} - on_disk
    assert len(trimmed) == 40 and all(r.terminal for r in records if r.agent_id in trimmed)

    snapshots: list[int] = []
    taken = store.snapshot

    def counting(offered):
        snapshots.append(len(offered))
        return taken(offered)

    store.snapshot = counting
    step(records[-1], "grep_files")
    apply_move(records[-1], ChildState.COMPLETED, "done")  # a status change: a new snapshot
    writer.mark_dirty(records[-1], 0)
    await writer.durable()
    assert snapshots and snapshots[-1] == MAX_RECORDS
    assert {a["agent_id"] for a in bare_file(store)["agents"]} == on_disk
