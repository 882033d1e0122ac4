"""Edit review in the app: Agent mode shows each file change as a diff and the answers
(this file, accept edits, deny with a message, approve a child's queued requests) work."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from textual.widgets import Button, Input, Static

from codewhale.config import load_config
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.providers.types import ToolCall
from codewhale.tools.base import ToolContext
from codewhale.tools.edit import EditFile
from codewhale.tools.files import WriteFile
from codewhale.tools.registry import ToolRegistry
from codewhale.tui.app import CodeWhaleApp, EngineEvent
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.status import StatusLine
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-edit-review"
SOURCE = 'def greet(name):\n    """Say hello."""\n    return "hi " + name\n'
CHILD = "Moby (worker, implementer)"


def tool_messages(llm) -> list[str]:
    return [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]


def offered(screen: ApprovalScreen) -> list[str]:
    return [str(button.label) for button in screen.query(Button) if button.display]


def dispatcher_for(app, workspace: Path, requester: str = "parent") -> ToolDispatcher:
    """A dispatcher whose approvals go to the app, as a child's engine's do."""
    return ToolDispatcher(
        ToolRegistry([WriteFile(), EditFile()]),
        ToolContext(workspace=workspace, session_id="edit-review"),
        lambda event: app.post_message(EngineEvent(event)),
        requester=requester,
    )


def write(name: str, content: str, call_id: str = "w") -> ToolCall:
    arguments = {"path": name, "content": content}
    return ToolCall(id=call_id, name="write_file", arguments=json.dumps(arguments))


async def test_accept_edits_key_shows_in_the_status_line_and_edits_run_unasked(
    llm, make_app, workspace
):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "a.txt", "content": "one\n"})]),
        Reply(text="written"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        status = app.query_one(StatusLine)
        assert "accept edits" not in str(status.render())
        await pilot.press("ctrl+t")
        assert app.runtime.accept_edits
        assert "AGENT  ⏵⏵ accept edits" in str(status.render())
        # With no dialog to answer, the turn can only end if the write ran unasked.
        await type_and_send(pilot, "write a")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 2)
        assert (workspace / "a.txt").read_text() == "one\n"
        assert tool_messages(llm) == ["Created a.txt (2 lines)."]
        await pilot.press("ctrl+t")
        assert not app.runtime.accept_edits
        assert "accept edits" not in str(status.render())
        await app.action_quit()


async def test_accept_all_edits_answer_turns_the_posture_on(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "a.txt", "content": "1\n"})]),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "b.txt", "content": "2\n"})]),
        Reply(text="both"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "write both")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("e")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 3)
        assert (workspace / "b.txt").read_text() == "2\n"  # the second write did not ask
        assert app.runtime.accept_edits
        assert "accept edits" in str(app.query_one(StatusLine).render())
        await app.action_quit()


async def test_this_file_answer_covers_later_edits_to_it_only(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "a.txt", "content": "one\n"})]),
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "edit_file", {"path": "a.txt", "old_string": "one", "new_string": "two"}
                )
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "b.txt", "content": "bee\n"})]),
        Reply(text="done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "edit")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        first = app.screen
        assert "This file [f]" in offered(first)
        await pilot.press("f")
        # The edit of a.txt runs unasked; the write of b.txt asks.
        await wait_for(
            pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not first
        )
        assert app.screen.request.files == ("b.txt",)
        assert (workspace / "a.txt").read_text() == "two\n"
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 4)
        assert not (workspace / "b.txt").exists()
        await app.action_quit()


async def test_deny_with_a_message_tells_the_model_why(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "a.txt", "content": "x\n"})]),
        Reply(text="understood"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "write a")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        dialog = app.screen
        await pilot.press("m")
        box = dialog.query_one("#deny-message", Input)
        assert box.display and box.has_focus
        for char in "name it b.txt":  # y, n and the other answer keys are text here
            await pilot.press(char if char != " " else "space")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 2)
        assert tool_messages(llm) == [
            "Error: the user denied this write_file call (a.txt) and said: name it b.txt"
        ]
        assert not (workspace / "a.txt").exists()
        await app.action_quit()


async def test_escape_in_the_message_box_backs_out_to_the_dialog(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        running = asyncio.create_task(dispatcher_for(app, workspace).run([write("a.txt", "x\n")]))
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        dialog = app.screen
        await pilot.press("m")
        await pilot.press("escape")
        assert app.screen is dialog and not dialog.query_one("#deny-message", Input).display
        await pilot.press("y")
        [outcome] = await running
        assert outcome.result.ok and (workspace / "a.txt").read_text() == "x\n"
        await app.action_quit()


async def test_a_childs_queued_edits_are_approved_together(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        first = asyncio.create_task(
            dispatcher_for(app, workspace, CHILD).run([write("m1.txt", "1\n")])
        )
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        dialog = app.screen
        assert dialog.query_one(Static).render().plain.startswith(f"Sub-agent {CHILD} asks")
        assert not any(label.startswith("Approve all") for label in offered(dialog))
        # Two more from the same child and one from another queue up behind it.
        later = [
            asyncio.create_task(dispatcher_for(app, workspace, requester).run([write(name, "x\n")]))
            for requester, name in [
                (CHILD, "m2.txt"),
                (CHILD, "m3.txt"),
                ("Ahab (other, implementer)", "a.txt"),
            ]
        ]
        await wait_for(pilot, lambda: "Approve all 3 [b]" in offered(dialog))
        await pilot.press("b")
        outcomes = [await first, await later[0], await later[1]]
        assert all(outcome.result.ok for [outcome] in outcomes)
        assert [(workspace / f"m{n}.txt").exists() for n in (1, 2, 3)] == [True, True, True]
        # The other child's request is still asked, on its own.
        await wait_for(
            pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not dialog
        )
        assert app.screen.request.requester == "Ahab (other, implementer)"
        assert not any(label.startswith("Approve all") for label in offered(app.screen))
        await pilot.press("n")
        [denied] = await later[2]
        assert not denied.result.ok and not (workspace / "a.txt").exists()
        await app.action_quit()


def test_snapshot_edit_dialog_with_a_highlighted_diff(snap_compare, llm, monkeypatch):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    (FIXED / "greet.py").write_text(SOURCE)
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.runtime is not None)
        new = SOURCE.replace('"hi " + name', 'f"Hello, {name}!"') + "\n\nprint(greet('you'))\n"
        app.run_worker(dispatcher_for(app, FIXED, CHILD).run([write("greet.py", new)]))
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        title = app.screen.query_one(".title", Static).render().plain
        assert title == f"Sub-agent {CHILD} asks to change greet.py  +4 −1"
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(96, 32), run_before=run_before)
