"""Edits show as coloured diffs, and a resumed session shows the cells a live turn makes:
tools with their results, diffs, sub-agents and reasoning."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.diff_view import DiffView
from codewhale.tui.history import HISTORY_MESSAGES, child_conversation, diff_of, rebuild
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import (
    AgentCell,
    AssistantMessage,
    Reasoning,
    ToolCell,
    UserMessage,
)
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-resume"
# The snapshot tests share FIXED (a stable path keeps the pictures stable): one worker.
pytestmark = pytest.mark.xdist_group("resume-view-snapshots")
EDIT = {"path": "notes.txt", "old_string": "hello", "new_string": "hello, world"}


def script_a_turn_that_edits_and_delegates(llm) -> None:
    # The child answers late enough that the parent has replied and is waiting for it.
    llm.route(is_child, Reply(text=REPORT, request_delay=0.5))
    llm.enqueue(
        Reply(
            reasoning="Edit first, then hand the survey to a helper.",
            tool_calls=[
                ToolCallSpec("edit_file", EDIT, id="c1"),
                ToolCallSpec(
                    "agent_open", {"prompt": "survey the repo", "description": "survey"}, id="c2"
                ),
            ],
        ),
        Reply(text="Edited **notes.txt**; a helper is surveying."),
    )
    llm.respond = lambda body: Reply(text="The survey is done.")


async def run_the_first_session(app, llm) -> None:
    async with app.run_test(size=(130, 36)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "edit and delegate")
        await wait_for(
            pilot,
            lambda: (
                not app.turn_running
                and "The survey is done." in [m.get("content") for m in app.runtime.messages]
            ),
        )
        await app.action_quit()


async def test_continue_rebuilds_tool_diff_reasoning_and_sub_agent_cells(llm, make_app, workspace):
    script_a_turn_that_edits_and_delegates(llm)
    await run_the_first_session(make_app(workspace), llm)

    again = CodeWhaleApp(load_config(workspace=workspace), workspace, continue_latest=True)
    async with again.run_test(size=(130, 36)) as pilot:
        await wait_for(pilot, lambda: bool(again.query(AssistantMessage)))
        assert [str(m.render()) for m in again.query(UserMessage)] == ["› edit and delegate"]
        thinking = again.query_one(Reasoning)
        assert thinking.collapsed and "hand the survey" in thinking.thinking
        # The agent_open call is shown by the cell of the child it opened, as live.
        (edit,) = again.query(ToolCell)
        assert str(edit.title) == "✓ edit_file notes.txt"
        assert "old_string: hello" in str(edit.arguments.render())
        diff = again.query_one(DiffView)
        assert diff.title == "notes.txt [green]+1[/] [red]−1[/]"
        assert "+hello, world" in diff.diff
        cell = again.query_one(AgentCell)
        assert str(cell.render()).endswith("└ completed")
        # In the order the live turn made them.
        order = [type(w).__name__ for w in again.transcript.children]
        assert order == [
            "UserMessage",
            "Reasoning",
            "ToolCell",
            "DiffView",
            "AgentCell",
            "AssistantMessage",
            "AssistantMessage",
        ]
        answers = [m.source for m in again.query(AssistantMessage)]
        assert answers == ["Edited **notes.txt**; a helper is surveying.", "The survey is done."]

        # The child's own screen comes from its transcript on disk (it ran in the last run).
        cell.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(again.screen, AgentScreen))
        screen = again.screen
        await wait_for(pilot, lambda: bool(screen.query(AssistantMessage)))
        assert screen.query_one(AssistantMessage).source == REPORT
        assert "survey the repo" in str(screen.query_one(".assignment").render())
        await again.action_quit()


def test_snapshot_resumed_session(snap_compare, llm, monkeypatch):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    (FIXED / "notes.txt").write_text("hello\n")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    script_a_turn_that_edits_and_delegates(llm)
    asyncio.run(run_the_first_session(CodeWhaleApp(load_config(workspace=FIXED), FIXED), llm))
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED, continue_latest=True)

    async def run_before(pilot):
        await wait_for(pilot, lambda: bool(app.query(AssistantMessage)))
        await steady(app, pilot)

    assert snap_compare(app, terminal_size=(130, 36), run_before=run_before)


def test_snapshot_an_edit_as_a_coloured_diff(snap_compare, llm, monkeypatch):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    (FIXED / "notes.txt").write_text("hello\nsecond line\n")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("edit_file", EDIT, id="c1")]),
        Reply(text="Greeted the world."),
    )
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)

    async def run_before(pilot):
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "greet the world")
        await wait_for(pilot, lambda: not app.turn_running and bool(app.query(AssistantMessage)))
        cell, diff = app.transcript.children[2:4]  # under the welcome line and the prompt
        assert isinstance(cell, ToolCell) and isinstance(diff, DiffView) and diff.collapsed
        cell.title = cell.title.rsplit("  ", 1)[0]  # the duration varies from run to run
        diff.collapsed = False
        await steady(app, pilot)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


async def steady(app, pilot) -> None:
    """Elapsed times pinned and a steady cursor, so the picture does not depend on timing."""
    for row in app.query(AgentRow):
        row.show(replace(app.runtime.manager.snapshot_of(row.agent_id), elapsed_ms=0))
    app.composer.focus()
    app.composer.cursor_blink = False
    await pilot.pause(0.3)


# -- rebuilding, message by message ------------------------------------------------------------


def call(call_id: str, name: str, **arguments) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def test_results_match_the_calls_of_their_own_step_when_ids_repeat():
    messages = [
        {"role": "system", "content": "the system prompt"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_0", "read_file", path="a")],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "first result"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_0", "list_dir")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "Error: no such directory"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_0", "exec_shell", command="ls")],
        },
    ]
    history = rebuild(messages, live=True)
    first, second, third = (w for w in history.widgets if isinstance(w, ToolCell))
    assert str(first.output.content) == "first result" and not first.has_class("failed")
    assert second.has_class("failed") and str(second.title) == "✗ list_dir"
    # The last call has no result yet (a child mid-tool): live events will finish it.
    assert str(third.title) == "… exec_shell ls"
    assert history.pending == {"call_0": third}
    # A conversation that is not running (a resumed session) never got that result.
    ended = rebuild(messages)
    last = [w for w in ended.widgets if isinstance(w, ToolCell)][-1]
    assert not ended.pending and str(last.title) == "✗ exec_shell ls"
    assert not any("system prompt" in str(getattr(w, "content", "")) for w in history.widgets)


def test_only_the_end_of_a_long_conversation_is_rebuilt():
    messages = [{"role": "user", "content": f"prompt {i}"} for i in range(HISTORY_MESSAGES + 50)]
    shown = [str(w.content) for w in rebuild(messages).widgets]
    assert len(shown) == HISTORY_MESSAGES
    assert shown[0] == "› prompt 50" and shown[-1] == f"› prompt {HISTORY_MESSAGES + 49}"


def test_a_childs_own_conversation_starts_after_its_assignment():
    forked = [
        {"role": "system", "content": "the opener's system prompt"},
        {"role": "user", "content": "the opener's prompt"},
        {"role": "system", "content": "<codewhale:fork_state>{}</codewhale:fork_state>"},
        {
            "role": "system",
            "content": "<codewhale:subagent_context>role</codewhale:subagent_context>",
        },
        {"role": "user", "content": "Assignment metadata:\n- objective: x\n\nTask:\nx"},
        {"role": "assistant", "content": "working on it"},
    ]
    assert child_conversation(forked) == [{"role": "assistant", "content": "working on it"}]
    assert child_conversation(forked[:1]) == []


def test_diffs_come_back_from_what_the_messages_kept():
    edit = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert diff_of("edit_file", {}, f"Edited x.py.\n{edit}") == edit
    assert diff_of("apply_patch", {"patch": edit}, "Applied patch: x.py.") == edit
    created = diff_of("write_file", {"path": "new.py", "content": "one\ntwo"}, "Created new.py.")
    assert created is not None and created.endswith("@@ -0,0 +1,2 @@\n+one\n+two\n")
    # An overwrite's earlier text is not in the session, so there is no diff to show.
    assert (
        diff_of("write_file", {"path": "x.py", "content": "b"}, "Updated x.py (1 lines).") is None
    )
    assert diff_of("edit_file", {}, "Error: old_string not found") is None
