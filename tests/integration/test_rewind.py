"""/rewind through the Runtime: real turns against the loopback model, real files.

Prompts make the model write, edit and delete files (a child too, writing in the
parent's tree); going back to a prompt must leave the files byte for byte as they were
then, the conversation as it was before it, and `--continue` must load it that way.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from codewhale.permissions import Mode
from codewhale.runtime import RuntimeRequestError, open_runtime
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.support.subagents import REPORT, for_task

# Bytes no text decoding round-trips unchanged: CRLF, Latin-1, no final newline.
ORIGINAL = b"caf\xe9\r\nline two\r\nno end"


@pytest.fixture
def workspace(tmp_path, llm, monkeypatch, isolated_home):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    root = tmp_path / "repo"
    root.mkdir()
    (root / "keep.txt").write_bytes(ORIGINAL)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o750)
    return root


def write(path: str, content: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec("write_file", {"path": path, "content": content})])


def patch(text: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec("apply_patch", {"patch": text})])


def conversation(runtime) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in runtime.messages[1:]]


def files(root) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


DELETE_RUN = "--- a/run.sh\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-#!/bin/sh\n-echo hi\n"


async def test_rewinding_both_restores_files_and_conversation_and_continue_loads_it(llm, workspace):
    llm.enqueue(
        write("first.txt", "one\n"),
        Reply(text="wrote first"),
        write("second.txt", "two\n"),
        write("keep.txt", "rewritten\n"),
        patch(DELETE_RUN),
        Reply(text="did the second"),
        Reply(text="after the rewind"),
    )
    runtime = open_runtime(workspace=workspace, mode=Mode.YOLO)
    await runtime.submit("make the first file")
    after_first = files(workspace)
    before_second = conversation(runtime)
    await runtime.submit("make the second file")
    assert not (workspace / "run.sh").exists() and (workspace / "second.txt").exists()

    points = runtime.rewind_points()
    assert [p.text for p in points] == ["make the second file", "make the first file"]
    outcome = await runtime.rewind(points[0].number, conversation=True, files=True)

    assert outcome.prompt == "make the second file"
    assert sorted(outcome.restored) == ["keep.txt", "run.sh", "second.txt"]
    assert outcome.skipped == []
    assert files(workspace) == after_first  # created gone, modified and deleted back
    assert (workspace / "keep.txt").read_bytes() == ORIGINAL
    assert os.stat(workspace / "run.sh").st_mode & 0o777 == 0o750
    assert conversation(runtime) == before_second
    assert [p.text for p in runtime.rewind_points()] == ["make the first file"]
    session_id = runtime.info.id
    await runtime.close()

    again = open_runtime(workspace=workspace, continue_latest=True)
    try:
        assert again.info.id == session_id
        assert conversation(again) == before_second
        await again.submit("something else")
    finally:
        await again.close()
    sent = [m.get("content") for m in llm.requests[-1].json["messages"][1:]]
    assert "make the second file" not in sent and sent[-1] == "something else"


async def test_rewinding_to_the_first_prompt_retitles_the_session(llm, workspace):
    llm.enqueue(Reply(text="hello"))
    runtime = open_runtime(workspace=workspace)
    await runtime.submit("the only prompt")
    await runtime.rewind(runtime.rewind_points()[0].number, conversation=True, files=False)
    await runtime.close()
    records = [json.loads(line) for line in runtime.info.path.read_text().splitlines()]
    assert {"kind": "rewind", "drop": 2, "title": ""} in records

    again = open_runtime(workspace=workspace, continue_latest=True)
    try:
        assert conversation(again) == []
        assert again.info.title == ""
    finally:
        await again.close()


async def test_a_file_changed_by_hand_since_is_left_alone_and_named(llm, workspace):
    llm.enqueue(write("notes.txt", "by the model\n"), write("other.txt", "x\n"), Reply(text="ok"))
    runtime = open_runtime(workspace=workspace, mode=Mode.YOLO)
    try:
        await runtime.submit("write notes")
        (workspace / "notes.txt").write_text("the user's own words\n")
        point = runtime.rewind_points()[0]
        outcome = await runtime.rewind(point.number, conversation=False, files=True)
    finally:
        await runtime.close()
    assert (workspace / "notes.txt").read_text() == "the user's own words\n"
    assert not (workspace / "other.txt").exists()
    assert outcome.restored == ["other.txt"]
    assert len(outcome.skipped) == 1 and outcome.skipped[0].startswith("notes.txt: changed")
    assert "Not restored: notes.txt" in outcome.summary(conversation=False, files=True)


async def test_files_only_then_an_earlier_prompt_still_finds_each_state(llm, workspace):
    llm.enqueue(
        write("keep.txt", "v1\n"),
        Reply(text="one"),
        write("keep.txt", "v2\n"),
        Reply(text="two"),
    )
    runtime = open_runtime(workspace=workspace, mode=Mode.YOLO)
    try:
        await runtime.submit("first")
        await runtime.submit("second")
        second, first = runtime.rewind_points()
        await runtime.rewind(second.number, conversation=False, files=True)
        assert (workspace / "keep.txt").read_text() == "v1\n"
        assert len(conversation(runtime)) == 8  # the conversation was not touched
        await runtime.rewind(first.number, conversation=False, files=True)
        assert (workspace / "keep.txt").read_bytes() == ORIGINAL
    finally:
        await runtime.close()


async def test_a_childs_writes_in_the_parents_tree_are_rewound_too(llm, workspace):
    child_task = "child writes"
    llm.route(
        for_task(child_task),
        write("from_child.txt", "child\n"),
        write("keep.txt", "child edit\n"),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": child_task}, id="open"),
                ToolCallSpec("agent_wait", {"mode": "all"}, id="wait"),
            ]
        ),
        Reply(text="the child is done"),
    )
    runtime = open_runtime(workspace=workspace, mode=Mode.YOLO)
    try:
        await runtime.submit("delegate")
        assert (workspace / "from_child.txt").exists()
        while runtime.live_children():  # the report has arrived; the child is settling
            await asyncio.sleep(0.01)
        outcome = await runtime.rewind(
            runtime.rewind_points()[0].number, conversation=True, files=True
        )
    finally:
        await runtime.close()
    assert sorted(outcome.restored) == ["from_child.txt", "keep.txt"]
    assert not (workspace / "from_child.txt").exists()
    assert (workspace / "keep.txt").read_bytes() == ORIGINAL


async def test_rewind_is_refused_while_a_turn_runs(llm, workspace):
    llm.enqueue(Reply(text="first"), Reply(text=["slow ", "answer"], chunk_delay=0.3))
    runtime = open_runtime(workspace=workspace)
    try:
        await runtime.submit("first")
        number = runtime.rewind_points()[0].number
        turn = asyncio.create_task(runtime.submit("long one"))
        while not runtime.turn_running:
            await asyncio.sleep(0.01)
        with pytest.raises(RuntimeRequestError, match="a turn is running; press Esc"):
            await runtime.rewind(number, conversation=True, files=True)
        await turn
        with pytest.raises(RuntimeRequestError, match="no longer in the conversation"):
            await runtime.rewind(999, conversation=True, files=False)
    finally:
        await runtime.close()
    assert len(conversation(runtime)) == 4
