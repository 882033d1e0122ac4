"""The full-screen app driven through Textual's Pilot against the loopback LLM."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from textual.command import CommandList

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.onboarding import OnboardingScreen
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import AgentCell, AssistantMessage, Notice, ToolCell, UserMessage
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.support.terminal import read_until, start_on_terminal
from tests.tui.conftest import REPORT, completion_rows, type_and_send, wait_for

SNAPSHOT_WORKSPACE = Path(tempfile.gettempdir()) / "codewhale-snapshot-workspace"


async def test_a_turn_streams_markdown_and_shows_tool_cells(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]),
        Reply(text=["**Done**", " reading ", "notes."]),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "read notes")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        assert app.query_one(UserMessage).render().plain == "› read notes"
        cell = app.query_one(ToolCell)
        assert cell.title.startswith("✓ read_file notes.txt")
        assert app.query_one(AssistantMessage).answer == "**Done** reading notes."
        assert app.runtime.usage.input_tokens > 0
        await app.action_quit()


async def test_enter_while_running_steers_and_esc_cancels(llm, make_app, workspace):
    # The command runs until the steer is typed, and the answer streams until Esc stops
    # it: however slow a busy machine types, both happen while the turn runs.
    wait_for_go = "while [ ! -e go ]; do sleep 0.02; done"
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": wait_for_go})]),
        Reply(text=[f"w{i} " for i in range(10)], fault=Fault.hold(2, until=threading.Event())),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "work")
        await wait_for(pilot, lambda: bool(app.query(ToolCell)))
        await type_and_send(pilot, "also this")
        (workspace / "go").touch()
        await wait_for(pilot, lambda: bool(app.query(AssistantMessage)))
        assert llm.requests[1].json["messages"][-1] == {"role": "user", "content": "also this"}
        assert any("steer accepted" in str(n.render()) for n in app.query(Notice))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.turn_running)
        assert any("turn cancelled" in str(n.render()) for n in app.query(Notice))
        await app.action_quit()


async def test_tab_toggles_plan_and_agent_on_an_empty_composer(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test() as pilot:
        assert app.runtime.mode is Mode.AGENT
        await pilot.press("tab")
        assert app.runtime.mode is Mode.PLAN
        await pilot.press("tab")
        assert app.runtime.mode is Mode.AGENT
        await app.action_quit()


async def test_slash_commands(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "/mode plan")
        assert app.runtime.mode is Mode.PLAN
        await type_and_send(pilot, "/agnet")
        await type_and_send(pilot, "/agent 7 do it")
        await type_and_send(pilot, "/help")
        notices = [str(n.render()) for n in app.query(Notice)]
        assert any("Unknown command /agnet. Did you mean /agent" in n for n in notices)
        assert any("Depth must be between 0 and 3" in n for n in notices)
        assert any("/relay [focus]" in n and "/batonpass" in n for n in notices)
        await app.action_quit()


async def test_agent_command_opens_a_child_shown_in_the_sidebar(llm, make_app, workspace):
    llm.route(
        lambda body: any("Assignment metadata" in str(m.get("content")) for m in body["messages"]),
        Reply(text=REPORT, request_delay=0.3),
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "survey", "max_depth": 1, "type": "explore"})
            ]
        ),
        Reply(text="waiting"),
        Reply(text="child done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "/agent 1 survey the repo")
        prompt = llm.requests[0].json["messages"][-1]["content"]
        assert "max_depth: 1" in prompt and "survey the repo" in prompt
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        await wait_for(pilot, lambda: not app.turn_running)
        row = app.query_one(AgentRow)
        assert "✓" in str(row.render()) and "explore" in str(row.tooltip)
        await pilot.click(f"#{row.id}")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "AgentScreen"
        await pilot.press("escape")
        await app.action_quit()


async def test_a_definitions_colour_marks_its_row_and_agent_types_lists_it(
    llm, make_app, workspace
):
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "painter.md").write_text(
        "---\nname: painter\ndescription: Paints the UI.\ntools: Read, WebSearch\n"
        "color: orange\n---\nYou paint.\n"
    )
    llm.route(
        lambda body: any("Task:\npaint" in str(m.get("content")) for m in body["messages"]),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "paint", "type": "painter"})])
    )
    llm.respond = lambda body: Reply(text="painted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "paint it")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        row = app.query_one(AgentRow)
        styles = {str(span.style) for span in row.content.spans}
        assert "dark_orange" in styles
        await wait_for(pilot, lambda: not app.turn_running)
        await type_and_send(pilot, "/agent types")
        listing = str(list(app.query(Notice))[-1].render())
        assert "painter  (" in listing and "tools: read_file" in listing
        assert "warning: tools not available here, dropped: WebSearch" in listing
        await app.action_quit()


async def test_approval_modal_names_the_requester_and_resolves(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "touch approved.txt"})]),
        Reply(text="made"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "make a file")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        assert "parent asks to run exec_shell" in str(app.screen.query_one(".title").render())
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.turn_running)
        assert (workspace / "approved.txt").exists()
        await app.action_quit()


async def test_onboarding_saves_the_key_privately(llm, monkeypatch, workspace, isolated_home):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        await pilot.click("#key")
        for char in "sk-typed-key-123456":
            await pilot.press(char)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, OnboardingScreen))
        path = isolated_home / "config" / "config.toml"
        assert 'api_key = "sk-typed-key-123456"' in path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        await wait_for(
            pilot,
            lambda: (
                app.runtime is not None
                and app.runtime.loaded.config.api_key == "sk-typed-key-123456"
            ),
        )
        await app.action_quit()


def test_main_screen_snapshot(snap_compare, llm, monkeypatch):
    SNAPSHOT_WORKSPACE.mkdir(exist_ok=True)
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(
        Reply(
            text="# Hello\n\nI can **read**, edit and run code.",
            usage={
                "prompt_tokens": 1200,
                "completion_tokens": 20,
                "prompt_cache_hit_tokens": 1024,
                "prompt_cache_miss_tokens": 176,
            },
        )
    )
    app = CodeWhaleApp(load_config(workspace=SNAPSHOT_WORKSPACE), SNAPSHOT_WORKSPACE)

    def settled() -> bool:
        answers = app.query(AssistantMessage)
        status = str(app.query_one(StatusLine).render())
        return (
            not app.turn_running
            and bool(answers)
            and "run code." in answers.first().source
            and "cache 85%" in status
            and "working" not in status
        )

    async def run_before(pilot) -> None:
        await type_and_send(pilot, "hello")
        await wait_for(pilot, settled, timeout=20)
        await pilot.wait_for_scheduled_animations()
        app.composer.focus()
        app.composer.cursor_blink = False
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


# A ceiling for a hang, not a measure: a real app's start takes seconds on a busy machine.
CEILING_SECS = 120


@pytest.mark.slow
def test_the_real_app_answers_a_typed_prompt_in_a_terminal(tmp_path, llm):
    llm.enqueue(Reply(text="pong-from-loopback"))
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "CODEWHALE_BASE_URL": llm.base_url,
        "DEEPSEEK_API_KEY": TEST_KEY,
    }
    process, controller = start_on_terminal(
        [sys.executable, "-m", "codewhale", "-C", str(tmp_path)], env
    )
    try:
        screen = read_until(controller, b"Ask", timeout=CEILING_SECS)
        assert b"Ask" in screen, screen[-500:]
        os.write(controller, b"ping")
        # Enter once the typed keys show in the composer, so it sends what was typed.
        typed = read_until(controller, b"ping", timeout=CEILING_SECS)
        assert b"ping" in typed, typed[-500:]
        os.write(controller, b"\r")
        answer = read_until(controller, b"pong-from-loopback", timeout=CEILING_SECS)
        assert b"pong-from-loopback" in answer, answer[-800:]
        assert llm.requests[-1].json["messages"][-1] == {"role": "user", "content": "ping"}
        os.write(controller, b"\x11")
        assert process.wait(timeout=CEILING_SECS) == 0
        rest = read_until(controller, b"Traceback", timeout=0.5)
        assert b"Traceback" not in screen + rest
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)


async def test_narrow_terminals_fold_the_sidebar_and_ctrl_b_toggles_it(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.has_class("narrow")
        assert app.sidebar.display is False
        await pilot.press("ctrl+b")
        assert app.sidebar.display is True
        await app.action_quit()


async def test_sub_agent_cell_streams_then_settles(llm, make_app, workspace):
    llm.route(
        lambda body: any("Assignment metadata" in str(m.get("content")) for m in body["messages"]),
        Reply(text=[f"line {i}\n" for i in range(30)] + [REPORT], chunk_delay=0.02),
    )
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "stream", "description": "s"})]),
        Reply(text="waiting"),
        Reply(text="done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "go")
        from codewhale.tui.transcript import AgentCell

        await wait_for(pilot, lambda: bool(app.query(AgentCell)))
        cell = app.query_one(AgentCell)
        # While it runs the cell previews the lines being written...
        await wait_for(pilot, lambda: "│ line" in str(cell.render()))
        await wait_for(pilot, lambda: not app.turn_running)
        # ...and once done, its report's SUMMARY, not the report's last lines.
        rendered = str(cell.render())
        assert "└ completed" in rendered and "│ SUMMARY: done" in rendered
        assert "BLOCKERS" not in rendered
        await app.action_quit()


def first_hit(app) -> str:
    """The command palette's first result as text ("" while it has none)."""
    hits = app.screen.query(CommandList)
    if not hits or not hits.first().option_count:
        return ""
    return str(hits.first().get_option_at_index(0).prompt)


async def test_slash_commands_are_in_the_command_palette(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("ctrl+p")
        for char in "relay":
            await pilot.press(char)
        # The palette searches in the background: Enter once its first hit is the command.
        await wait_for(pilot, lambda: "/relay" in first_hit(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.composer.text == "/relay ")
        await app.action_quit()


async def test_sessions_picker_resumes_an_earlier_conversation(llm, make_app, workspace):
    llm.enqueue(Reply(text="first answer"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "remember 42")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        await app.action_quit()
    llm.enqueue(Reply(text="it was 42"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await type_and_send(pilot, "/sessions")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SessionPicker")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Resumed" in str(n.render()) for n in app.query(Notice)))
        assert any("remember 42" in str(m.render()) for m in app.query(UserMessage))
        await type_and_send(pilot, "what was it?")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        contents = [m["content"] for m in llm.requests[-1].json["messages"]]
        assert "remember 42" in contents and "first answer" in contents
        await app.action_quit()


async def test_twenty_streaming_children_all_settle_in_the_sidebar(llm, make_app, workspace):
    llm.route(
        lambda body: any("Assignment metadata" in str(m.get("content")) for m in body["messages"]),
        respond=lambda body: Reply(
            text=[f"chunk {i} " for i in range(40)] + [REPORT], chunk_delay=0.005
        ),
    )
    opens = [ToolCallSpec("agent_open", {"prompt": f"job {i}"}) for i in range(20)]
    llm.enqueue(Reply(tool_calls=opens))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 50)) as pilot:
        await type_and_send(pilot, "fan out")
        await wait_for(pilot, lambda: not app.turn_running, timeout=30)
        await pilot.pause(0.1)
        rows = list(app.query(AgentRow))
        assert len(rows) == 20
        assert all(str(row.render()).startswith("✓") for row in rows)
        assert "20 (0 running)" in str(app.sidebar.agents_title.render())
        await app.action_quit()


async def test_an_opened_child_stands_for_its_call_and_a_refused_open_shows_the_call(
    llm, make_app, workspace
):
    llm.route(
        lambda body: any("Assignment metadata" in str(m.get("content")) for m in body["messages"]),
        Reply(text=REPORT),
    )
    opens = [
        ToolCallSpec("agent_open", {"prompt": "survey", "description": "surveyor"}),
        ToolCallSpec("agent_open", {"prompt": "paint", "type": "no-such-type"}),
    ]
    llm.enqueue(Reply(tool_calls=opens))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "open two")
        await wait_for(pilot, lambda: not app.turn_running and bool(app.query(AssistantMessage)))
        (child,) = app.query(AgentCell)
        assert "surveyor" in str(child.render())
        # The open that made no child is the only agent_open with a tool cell, failed.
        (refused,) = [cell for cell in app.query(ToolCell) if cell.name_ == "agent_open"]
        assert str(refused.title).startswith("✗ agent_open")
        assert "no-such-type" in str(refused.output.render())
        await app.action_quit()


async def test_rlm_command_opens_a_session_listed_in_the_sidebar(llm, make_app, workspace):
    def model(body):
        steps = [m for m in body["messages"] if m["role"] == "assistant"]
        if not steps:
            return Reply(
                tool_calls=[ToolCallSpec("rlm_open", {"file_path": "notes.txt", "name": "notes"})]
            )
        return Reply(text="opened")

    llm.respond = model
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "/rlm 2 notes.txt")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        prompt = llm.requests[0].json["messages"][-1]["content"]
        assert 'file_path: "notes.txt"' in prompt and "sub_rlm_max_depth: 2" in prompt
        assert "notes  6 chars" in str(app.sidebar.rlm.render())
        await type_and_send(pilot, "/rlm 5 x")
        assert any("Depth must be between 0 and 3" in str(n.render()) for n in app.query(Notice))
        await app.action_quit()


async def test_typing_a_slash_or_at_shows_completions(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        for char in "/re":
            await pilot.press(char)
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        listed = " ".join(completion_rows(app))
        assert "/relay [focus]" in listed and "/revert [N]" in listed
        app.composer.clear()
        for char in "see @not":
            await pilot.press(char if char != " " else "space")
        await wait_for(pilot, lambda: completion_rows(app) == ["notes.txt"])
        await pilot.press("tab")
        assert app.composer.text == "see @notes.txt "
        await app.action_quit()


async def test_a_command_typed_into_the_key_field_is_not_saved_as_a_key(workspace, isolated_home):
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        await pilot.press(*"/mcp", "enter")
        await pilot.pause()
        assert isinstance(app.screen, OnboardingScreen)
        assert app.screen.query_one("#key").value == ""
        notes = [n.message for n in app._notifications]
        assert any("does not look like an API key: it is too short" in n for n in notes)
        await pilot.press(*"/compact now", "enter")
        await pilot.pause()
        assert any("has spaces in it" in n.message for n in app._notifications)
        assert not (isolated_home / "config" / "config.toml").exists()
        await app.action_quit()


async def test_offline_onboarding_takes_a_key_without_a_click_and_esc_continues(workspace):
    """Nothing configured: the dialog is over the offline model, ready for a paste."""
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    assert app.loaded.offline_fallback, "needs the local extra (`make local`)"
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        await pilot.press("s", "k")
        assert app.screen.query_one("#key").value == "sk"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, OnboardingScreen))
        assert app.runtime.loaded.config.provider == "local"
        assert app.focused is app.composer
        await app.action_quit()


async def test_onboarding_offers_an_installed_local_server(
    llm, monkeypatch, workspace, isolated_home, tmp_path
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ollama"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        await pilot.click("#local-ollama")
        await wait_for(
            pilot,
            lambda: app.runtime is not None and app.runtime.loaded.config.provider == "ollama",
        )
        assert 'provider = "ollama"' in (isolated_home / "config" / "config.toml").read_text()
        await app.action_quit()


async def test_pending_approvals_queue_one_after_another(llm, make_app, workspace):
    def child(body):
        steps = [m for m in body["messages"] if m["role"] == "assistant"]
        if not steps:
            return Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo child"})])
        return Reply(text=REPORT)

    llm.route(
        lambda body: any("Assignment metadata" in str(m.get("content")) for m in body["messages"]),
        respond=child,
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "a", "name": "first"}),
                ToolCallSpec("agent_open", {"prompt": "b", "name": "second"}),
            ]
        ),
    )
    llm.respond = lambda body: Reply(text="ok")
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "two children")
        askers = []
        for _ in range(2):
            # The next question, not the one just answered while it closes.
            await wait_for(
                pilot,
                lambda: (
                    isinstance(app.screen, ApprovalScreen)
                    and app.screen.request.requester not in askers
                ),
            )
            askers.append(app.screen.request.requester)
            await pilot.press("n")
        await wait_for(pilot, lambda: not app.turn_running)
        assert sorted(name.split("(")[1].split(",")[0] for name in askers) == ["first", "second"]
        await app.action_quit()
