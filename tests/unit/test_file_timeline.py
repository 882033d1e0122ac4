"""The file timeline /rewind restores from: real file tools writing in real temp dirs.

A child's context is made as the sub-agent builder makes it: the parent's, with its own
session id and journal, sharing the session's change record (and so its timeline).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from codewhale.permissions import Mode, ModeSwitch
from codewhale.sessions.reading import read_session
from codewhale.tools.base import ToolContext
from codewhale.tools.edit import EditFile
from codewhale.tools.file_timeline import apply_restore, plan_restore
from codewhale.tools.files import WriteFile
from codewhale.tools.journal import ChangeJournal
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.session_changes import SessionChanges


@pytest.fixture
def parent(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_bytes(b"one\r\ntwo\r\n")
    return ToolContext(
        workspace=root, session_id="s1", modes=ModeSwitch(Mode.YOLO), changes=SessionChanges()
    )


def rewind(context: ToolContext, checkpoint: int) -> tuple[list[str], list[str]]:
    assert context.changes is not None
    timeline = context.changes.timeline
    plan = plan_restore(context.workspace, timeline, checkpoint)
    restored, refused = apply_restore(context.workspace, plan, timeline)
    return restored, plan.skipped + refused


async def test_each_checkpoint_restores_the_files_as_they_were_when_it_was_taken(parent):
    assert parent.changes is not None
    timeline = parent.changes.timeline
    child = replace(parent, session_id="agent:c1", journal=ChangeJournal())
    first = timeline.mark()
    await WriteFile().run({"path": "a.txt", "content": "a\n"}, parent)
    second = timeline.mark()
    await EditFile().run({"path": "notes.txt", "old_string": "two", "new_string": "2"}, child)
    await ApplyPatch().run({"patch": "--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"}, parent)
    await WriteFile().run({"path": "b/c.txt", "content": "c\n"}, child)

    assert rewind(parent, second) == (["a.txt", "b/c.txt", "notes.txt"], [])
    assert (parent.workspace / "a.txt").read_text() == "a\n"
    assert (parent.workspace / "notes.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert not (parent.workspace / "b" / "c.txt").exists()

    assert rewind(parent, first) == (["a.txt"], [])
    assert not (parent.workspace / "a.txt").exists()


async def test_a_file_changed_after_the_apps_last_write_is_skipped_with_a_reason(parent):
    assert parent.changes is not None
    checkpoint = parent.changes.timeline.mark()
    await WriteFile().run({"path": "notes.txt", "content": "model\n"}, parent)
    await WriteFile().run({"path": "made.txt", "content": "model\n"}, parent)
    (parent.workspace / "notes.txt").unlink()
    (parent.workspace / "made.txt").write_text("by hand\n")

    restored, skipped = rewind(parent, checkpoint)

    assert restored == []
    assert [reason.split(":")[0] for reason in skipped] == ["notes.txt", "made.txt"]
    assert all("changed outside the app's file tools" in reason for reason in skipped)
    assert not (parent.workspace / "notes.txt").exists()
    assert (parent.workspace / "made.txt").read_text() == "by hand\n"


def test_a_rewind_record_drops_the_newest_messages_on_loading(tmp_path):
    header = {"kind": "session", "id": "s", "workspace": "/w", "created_at": 1.0, "model": "m"}
    lines = [header] + [
        {"kind": "message", "message": m}
        for m in (
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "1"},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": "2"},
        )
    ]
    lines += [{"kind": "rewind", "drop": 2, "title": "one"}, {"kind": "rewind", "drop": 9}]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    parsed = read_session(path)

    assert parsed is not None
    assert [m["content"] for m in parsed.messages] == ["sys", "one", "1"]
    assert parsed.title == "one"
    assert parsed.damage == ["line 8: unusable rewind record skipped"]


def tree(context: ToolContext) -> dict[str, bytes]:
    root = context.workspace
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_random_writes_rewind_to_each_checkpoint_byte_for_byte(parent):
    """200 writes by a parent and a child over 20 prompts; rewinds in a random order."""
    assert parent.changes is not None
    timeline = parent.changes.timeline
    child = replace(parent, session_id="agent:c1", journal=ChangeJournal())
    chance = random.Random(30)
    names = [f"f{n}.txt" for n in range(12)]
    states = {}
    for _ in range(20):
        checkpoint = timeline.mark()
        states[checkpoint] = tree(parent)
        for _ in range(10):
            writer, name = chance.choice((parent, child)), chance.choice(names)
            if (parent.workspace / name).exists() and chance.random() < 0.3:
                delete = f"--- a/{name}\n+++ /dev/null\n@@ -1 +0,0 @@\n-{name}\n"
                await WriteFile().run({"path": name, "content": f"{name}\n"}, writer)
                await ApplyPatch().run({"patch": delete}, writer)
            else:
                body = "".join(chance.choice("ab\r\n\xe9") for _ in range(chance.randrange(40)))
                await WriteFile().run({"path": name, "content": body}, writer)

    order = list(states)
    chance.shuffle(order)
    for checkpoint in order:
        assert rewind(parent, checkpoint)[1] == []
        assert tree(parent) == states[checkpoint], f"checkpoint {checkpoint}"
