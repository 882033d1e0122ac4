"""A sub-agent state file with one good record and one damaged, each way it can be."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.store import SubagentStore

GOOD = "agent_00000001"
VICTIM = "agent_00000002"


def record(agent_id: str, objective: str) -> dict:
    data = WorkerRecord(
        run_id=f"run_{agent_id}",
        agent_id=agent_id,
        name=agent_id,
        nickname="Moby",
        objective=objective,
        description=objective,
        type="explore",
        role="explore",
        model="deepseek-v4-flash",
        workspace="/w",
        git_branch=None,
        session_boot_id="boot_earlier",
        status="completed",
        worker_status="completed",
        result="SUMMARY: found it",
    ).to_json()
    data["events"] = [{"seq": 1, "ts_ms": 1, "status": "completed", "message": "completed"}]
    return data


def document(agents: list) -> dict:
    return {"schema_version": 1, "journal": 1, "agents": agents}


def encoded(agents: list) -> bytes:
    return json.dumps(document(agents)).encode()


def with_victim(change: Callable[[dict], object]) -> bytes:
    victim = record(VICTIM, "the victim")
    return encoded([record(GOOD, "the good one"), change(victim)])


def binary_byte() -> bytes:
    text = encoded([record(GOOD, "the good one"), record(VICTIM, "the victim")])
    cut = text.index(f'"agent_id": "{VICTIM}"'.encode())
    return text[:cut] + b"\x00\xff" + text[cut:]


def truncated() -> bytes:
    text = encoded([record(GOOD, "the good one"), record(VICTIM, "the victim")])
    return text[: text.index(b"the victim")]


def wrong_types(victim: dict) -> dict:
    return {**victim, "steps_taken": "five", "usage": 7}


def unknown_status(victim: dict) -> dict:
    return {**victim, "status": "paused", "worker_status": "paused"}


def missing_field(victim: dict) -> dict:
    return {key: value for key, value in victim.items() if key != "run_id"}


# The snapshot's bytes for each kind of damage to one record (the good one survives).
SNAPSHOT_DAMAGE = {
    "null record": lambda: with_victim(lambda victim: None),
    "wrong field types": lambda: with_victim(wrong_types),
    "binary byte": binary_byte,
    "truncated JSON": truncated,
    "a list instead of an object": lambda: with_victim(lambda victim: list(victim.items())),
    "unknown status": lambda: with_victim(unknown_status),
    "missing required field": lambda: with_victim(missing_field),
}
KINDS = [*SNAPSHOT_DAMAGE, "huge garbage journal line"]


def damage(workspace: Path, kind: str) -> Path:
    """Write the damaged state; returns the file the damage is in."""
    store = SubagentStore(workspace)
    store.state_file.parent.mkdir(parents=True, exist_ok=True)
    if kind in SNAPSHOT_DAMAGE:
        store.state_file.write_bytes(SNAPSHOT_DAMAGE[kind]())
        return store.state_file
    store.state_file.write_bytes(encoded([record(GOOD, "the good one")]))
    change = {"agent_id": GOOD, "set": {"activity": "replayed"}}
    journal = store.journal_path(1)
    with journal.open("wb") as handle:
        handle.write(b"\x00garbage" * (700 * 1024) + b"\n")  # 5.6 MB: past any line's limit
        handle.write(b"{not json\n")
        handle.write(json.dumps(change).encode() + b"\n")
    return journal


def set_aside(damaged: Path) -> list[Path]:
    return sorted(damaged.parent.glob(f"{damaged.name}.damaged-*"))
