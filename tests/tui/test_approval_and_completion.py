"""The approval dialog (who asks, exactly what runs, the diff a write would make) and `@` files."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Button, Input, Static

from codewhale.config import load_config
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.providers.types import ToolCall
from codewhale.tools.base import ToolContext
from codewhale.tools.edit import EditFile
from codewhale.tools.registry import ToolRegistry
from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.app import CodeWhaleApp, EngineEvent
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import AssistantMessage, Notice, ToolCell, UserMessage
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import REPORT, completion_rows, is_child, type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-approval"
DEPLOY = (
    "make build && ./scripts/deploy.sh --target staging --region eu-west-1 "
    "--tag release-2024-06-01 --notify ops@example.com --dry-run=false"
)


def visible_text(screen) -> str:
    """Every Static's text on the screen, as the user reads it."""
    return "\n".join(str(static.render()) for static in screen.query(Static))


def child_shell_script(llm) -> None:
    llm.route(
        is_child,
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": DEPLOY})]),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "agent_open",
                    {
                        "prompt": "deploy to staging",
                        "type": "implementer",
                        "name": "deployer",
                        "description": "deploy staging",
                    },
                )
            ]
        ),
        Reply(text="waiting for the deployer"),
        Reply(text="deployed"),
    )


async def test_a_childs_command_names_the_child_and_shows_all_of_it(llm, make_app, workspace):
    child_shell_script(llm)
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "ship it")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        dialog = app.screen
        nickname = app.runtime.agents()[0].nickname
        text = visible_text(dialog)
        assert f"Sub-agent {nickname} (deployer, implementer) asks to run exec_shell" in text
        assert DEPLOY in text
        labels = [str(button.label) for button in dialog.query(Button) if button.display]
        assert labels == [
            "Approve once [y]",
            "Always this session [a]",
            "Always in this project [p]",
            "Deny [n]",
            "Deny and say why [m]",
        ]
        assert "y approve once · a always this session · p always in this project" in text
        assert "n / Esc deny · m deny and say why" in text
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ApprovalScreen))
        await app.action_quit()


async def test_the_rule_always_stores_is_shown_before_the_answer(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "git log --oneline"})]),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "git log --output=pwned"})]),
        Reply(text="done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "look")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        dialog = app.screen
        rule = dialog.query_one(".scope", Static)
        assert str(rule.render()) == (
            "“Always” allows, for this session: exec_shell commands starting `git log` "
            "(except chained or redirected ones, and options or scripts that write files or "
            "run other programs)"
        )
        assert rule.region.bottom <= dialog.query_one("#approve_always").region.y
        await pilot.press("a")
        # `--output` writes a file: the rule for `git log` does not cover it, so it asks.
        await wait_for(
            pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not dialog
        )
        text = visible_text(app.screen)
        assert (
            "allows, for this session: exactly this exec_shell call: `git log --output=pwned`"
            in text
        )
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.turn_running)
        await app.action_quit()
    assert not (workspace / "pwned").exists()


async def test_keys_typed_as_the_dialog_opens_do_not_answer_it(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo one"})]),
        Reply(text="ran it"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "run one")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        dialog = app.screen
        # As if it had just opened: the "y" of a word being typed is not an answer.
        dialog.armed_at = time.monotonic() + 60
        await pilot.press("y", "a")
        await pilot.pause(0.05)
        assert app.screen is dialog
        dialog.armed_at = time.monotonic()
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.turn_running)
        tool_results = [m for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
        assert len(tool_results) == 1 and "one" in tool_results[0]["content"]


async def test_focus_returns_to_where_it_was_after_an_answer(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo one"})]),
        Reply(text="first done"),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo two"})]),
        Reply(text="second done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "run one")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.turn_running)
        assert app.focused is app.composer
        # Clicking a button moves focus into the dialog; it still comes back.
        await type_and_send(pilot, "run two")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        # Clicked once it is laid out (before, the click would land on nothing).
        await wait_for(pilot, lambda: any(b.region.area for b in app.screen.query("#approve")))
        await pilot.click("#approve")
        await wait_for(pilot, lambda: not app.turn_running)
        assert app.focused is app.composer
        await app.action_quit()


def slow_child_script(llm) -> None:
    """A child that asks for a shell command after a second, then stays running a while."""
    llm.route(
        is_child,
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo hi"})], request_delay=1.0),
        Reply(text=REPORT, request_delay=3.0),
    )
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "say hi", "type": "general"})]),
        Reply(text="waiting"),
        Reply(text="done"),
    )


async def test_focus_returns_to_the_sidebar_row_that_had_it(llm, make_app, workspace):
    slow_child_script(llm)
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "greet")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        row = app.query_one(AgentRow)
        row.focus()
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ApprovalScreen))
        assert app.focused is row
        await app.action_quit()


async def test_focus_returns_to_the_agent_screens_message_box(llm, make_app, workspace):
    slow_child_script(llm)
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "greet")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        app.post_message(AgentRow.Selected(app.query_one(AgentRow).agent_id))
        await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
        agent_screen = app.screen
        box = agent_screen.query_one("#agent-message", Input)
        await wait_for(pilot, lambda: agent_screen.focused is box)
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is agent_screen)
        assert app.focused is box
        await app.action_quit()


async def test_an_edit_asks_with_its_diff_and_writes_only_once_approved(llm, make_app, workspace):
    target = workspace / "calc.py"
    target.write_text("def add(a, b):\n    return a - b\n")
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        dispatcher = ToolDispatcher(
            ToolRegistry([EditFile()]),
            ToolContext(workspace=workspace, session_id="edit-test"),
            lambda event: app.post_message(EngineEvent(event)),
        )
        arguments = {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}
        call = ToolCall(id="e1", name="edit_file", arguments=json.dumps(arguments))
        running = asyncio.create_task(dispatcher.run([call]))
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        preview = app.screen.query_one(".preview", Static)
        assert isinstance(preview.content, Text)
        shown = preview.content.plain
        assert "-    return a - b" in shown and "+    return a + b" in shown
        # The code is coloured as Python, not only by the diff's signs.
        keyword = shown.index("return")
        assert any(span.start <= keyword < span.end for span in preview.content.spans)
        assert target.read_text() == "def add(a, b):\n    return a - b\n"
        await pilot.press("y")
        [outcome] = await running
        assert outcome.result.ok
        assert target.read_text() == "def add(a, b):\n    return a + b\n"
        await app.action_quit()


async def test_a_protected_write_asks_in_agent_mode_and_says_why(llm, make_app, workspace):
    """A write to `.mcp.json` asks as a protected path, not as an edit: the dialog says why."""
    plant = {"path": ".mcp.json", "content": '{"mcpServers": {}}\n'}
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("write_file", plant)]), Reply(text="ok"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "add an mcp server")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        shown = visible_text(app.screen)
        assert ".mcp.json is protected: the project's MCP servers" in shown
        assert "write_file writing exactly .mcp.json" in shown
        await pilot.press("n")
        await wait_for(pilot, lambda: len(llm.requests) == 2)
        assert not (workspace / ".mcp.json").exists()
        await app.action_quit()


def git_workspace(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "app_bundle.js").write_text("ignored\n")
    state = root / ".codewhale"
    state.mkdir(exist_ok=True)
    (state / "app_session.json").write_text("{}\n")
    subprocess.run(["git", "-C", str(root), "add", "src", ".gitignore"], check=True)
    return root


async def test_at_completion_offers_gits_files_and_never_codewhale_state(llm, make_app, workspace):
    git_workspace(workspace)
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        for key in ("@", "a", "p", "p"):
            await pilot.press(key)
        await wait_for(pilot, lambda: "indexing" not in " ".join(completion_rows(app)))
        offered = completion_rows(app)
        assert offered[0] == "src/app.py"
        assert not any(".codewhale" in path or path.startswith("build/") for path in offered)
        await pilot.press("tab")
        assert app.composer.text == "@src/app.py "
        app.composer.clear()
        for key in ("@", "s", "e", "s", "s"):
            await pilot.press(key)
        await pilot.pause(0.05)
        assert not any(".codewhale" in path for path in completion_rows(app))
        await app.action_quit()


async def test_an_at_path_attaches_the_file_and_shows_a_chip(llm, make_app, workspace):
    llm.enqueue(Reply(text="got it"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "@notes.txt please")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        sent = llm.requests[-1].json["messages"][-1]["content"]
        assert sent == (
            '@notes.txt please\n\n<attachment path="notes.txt" lines="1">\nhello\n</attachment>'
        )
        [user] = app.query(UserMessage)
        assert str(user.render()) == "› @notes.txt please"
        chips = [str(n.render()) for n in app.query(Notice) if n.has_class("attachment")]
        assert chips == ["📎 notes.txt (1 line)"]
        await app.action_quit()


# -- snapshots ---------------------------------------------------------------------------------


@pytest.fixture
def fixed_app(llm, monkeypatch):
    shutil.rmtree(FIXED / ".codewhale", ignore_errors=True)
    FIXED.mkdir(exist_ok=True)
    (FIXED / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return lambda: CodeWhaleApp(load_config(workspace=FIXED), FIXED)


def test_snapshot_child_shell_approval(snap_compare, llm, fixed_app):
    child_shell_script(llm)
    app = fixed_app()

    async def run_before(pilot):
        await type_and_send(pilot, "ship it")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        # The parent has answered and waits on its child: the status line holds still.
        await wait_for(
            pilot,
            lambda: (
                any("waiting" in m.answer for m in app.query(AssistantMessage))
                and "$" in str(app.query_one(StatusLine).render())
            ),
        )
        for cell in app.query(ToolCell):  # no durations: they depend on the machine
            cell.title = cell.title.rsplit("  ", 1)[0]
        await pilot.pause(0.2)

    # Narrow enough that the Work sidebar (with its running clock) folds away.
    assert snap_compare(app, terminal_size=(96, 30), run_before=run_before)


def test_snapshot_edit_approval_diff(snap_compare, llm, fixed_app):
    app = fixed_app()

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.runtime is not None)
        dispatcher = ToolDispatcher(
            ToolRegistry([EditFile()]),
            ToolContext(workspace=FIXED, session_id="edit-snapshot"),
            lambda event: app.post_message(EngineEvent(event)),
        )
        arguments = {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}
        call = ToolCall(id="e1", name="edit_file", arguments=json.dumps(arguments))
        app.run_worker(dispatcher.run([call]))
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(96, 30), run_before=run_before)
