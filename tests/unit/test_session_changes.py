"""The session's changes for /diff: real file tools writing in real temp dirs, then compared.

A child's context is made as the sub-agent builder makes it: the parent's, with its own
session id and journal, sharing the session's change record.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from codewhale.permissions import Mode, ModeSwitch
from codewhale.subagents.worktree import WORKTREES_DIR, in_a_worktree
from codewhale.tools.base import ToolContext
from codewhale.tools.edit import EditFile
from codewhale.tools.files import WriteFile
from codewhale.tools.journal import ChangeJournal
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.session_changes import FileChange, SessionChanges, compare, images_of
from codewhale.tools.work import RevertTurn


@pytest.fixture
def parent(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("one\ntwo\nthree\n")
    return ToolContext(
        workspace=root, session_id="s1", modes=ModeSwitch(Mode.YOLO), changes=SessionChanges()
    )


def child_of(parent: ToolContext, agent_id: str) -> ToolContext:
    return replace(parent, session_id=f"agent:{agent_id}", journal=ChangeJournal())


def named(author: str) -> str:
    return "parent" if author == "s1" else author.removeprefix("agent:")


def changes_of(context: ToolContext) -> dict[str, FileChange]:
    assert context.changes is not None
    touched = context.changes.touched(named)
    return {change.path: change for change in compare(context.workspace, touched)}


async def test_a_parent_write_and_edit_are_listed_with_their_diffs(parent):
    await WriteFile().run({"path": "src/new.py", "content": "print('hi')\n"}, parent)
    await EditFile().run({"path": "notes.txt", "old_string": "two", "new_string": "TWO"}, parent)

    found = changes_of(parent)
    assert list(found) == ["notes.txt", "src/new.py"]
    created, edited = found["src/new.py"], found["notes.txt"]
    assert (created.status, created.authors) == ("created", ("parent",))
    assert "+print('hi')" in created.diff.splitlines()
    assert (edited.status, edited.authors) == ("modified", ("parent",))
    assert "-two" in edited.diff.splitlines() and "+TWO" in edited.diff.splitlines()
    assert edited.diff.startswith("--- a/notes.txt\n+++ b/notes.txt\n")


async def test_the_diff_is_against_the_first_version_not_the_last_turn(parent):
    await EditFile().run({"path": "notes.txt", "old_string": "one", "new_string": "ONE"}, parent)
    parent.journal.begin_turn(2)
    await EditFile().run(
        {"path": "notes.txt", "old_string": "three", "new_string": "THREE"}, parent
    )

    diff = changes_of(parent)["notes.txt"].diff.splitlines()
    assert {"-one", "+ONE", "-three", "+THREE"} <= set(diff)


async def test_a_childs_write_names_the_child_after_the_parent(parent):
    child = child_of(parent, "a1b2")
    await WriteFile().run({"path": "child.txt", "content": "from the child\n"}, child)
    await EditFile().run({"path": "notes.txt", "old_string": "one", "new_string": "uno"}, parent)
    await EditFile().run({"path": "notes.txt", "old_string": "three", "new_string": "tres"}, child)

    found = changes_of(parent)
    assert found["child.txt"].authors == ("a1b2",)
    assert found["notes.txt"].authors == ("parent", "a1b2")
    assert {"-one", "+uno", "-three", "+tres"} <= set(found["notes.txt"].diff.splitlines())


async def test_a_file_created_then_deleted_is_not_a_change(parent):
    await WriteFile().run({"path": "tmp.txt", "content": "scratch\n"}, parent)
    delete = "--- a/tmp.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-scratch\n"
    await ApplyPatch().run({"patch": delete}, parent)

    assert not (parent.workspace / "tmp.txt").exists()
    assert changes_of(parent) == {}


async def test_a_deleted_file_shows_its_removed_lines(parent):
    delete = "--- a/notes.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n"
    await ApplyPatch().run({"patch": delete}, parent)

    change = changes_of(parent)["notes.txt"]
    assert change.status == "deleted"
    assert [line for line in change.diff.splitlines() if line.startswith("-")][1:] == [
        "-one",
        "-two",
        "-three",
    ]


async def test_a_reverted_turn_leaves_nothing_to_show(parent):
    await EditFile().run({"path": "notes.txt", "old_string": "two", "new_string": "2"}, parent)
    await RevertTurn().run({"turns": 1}, parent)

    assert (parent.workspace / "notes.txt").read_text() == "one\ntwo\nthree\n"
    assert changes_of(parent) == {}


async def test_a_binary_file_shows_its_size_not_a_diff(parent):
    (parent.workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(90))
    await WriteFile().run({"path": "logo.png", "content": "now text\n"}, parent)
    await WriteFile().run({"path": "blob.bin", "content": "a\x00b\x00c"}, parent)

    found = changes_of(parent)
    assert (found["logo.png"].diff, found["logo.png"].note) == ("", "binary, 9 bytes")
    assert (found["blob.bin"].status, found["blob.bin"].note) == ("created", "binary, 5 bytes")


async def test_a_context_without_a_record_writes_without_recording(parent):
    isolated = replace(child_of(parent, "w1"), changes=None)
    await WriteFile().run({"path": "elsewhere.txt", "content": "x\n"}, isolated)

    assert changes_of(parent) == {}


def test_images_of_reads_the_files_now_and_skips_what_the_tools_could_not_write(parent, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours\n")
    root = parent.workspace
    images = dict(images_of(root, [root / "notes.txt", root / "absent.txt", outside]))

    assert set(images) == {root / "notes.txt", root / "absent.txt"}
    notes = images[root / "notes.txt"]
    assert notes is not None and notes.data == b"one\ntwo\nthree\n"
    assert images[root / "absent.txt"] is None


def test_an_isolated_childs_worktree_is_told_from_the_work_tree(tmp_path):
    assert in_a_worktree(tmp_path / ".git" / WORKTREES_DIR / "ab12cd34" / "src")
    assert not in_a_worktree(tmp_path / "src")
