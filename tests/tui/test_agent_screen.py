"""The agent screen: a child's assignment and transcript, followed live from its own events."""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from textual.widgets import Input

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.runtime import events, open_runtime
from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.diff_view import DiffView
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import (
    AgentCell,
    AssistantMessage,
    Notice,
    Reasoning,
    ToolCell,
    UserMessage,
)
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import (
    REPORT,
    Layouts,
    is_child,
    open_agent_screen,
    type_and_send,
    wait_for,
)

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-agent-screen"


def child_requests(llm) -> list[dict]:
    return [r.json for r in llm.requests if is_child(r.json)]


def enabled(screen: AgentScreen) -> set[str]:
    return {str(w.id) for w in screen.query("Input, Button") if not w.disabled}


def header(screen: AgentScreen) -> str:
    return str(screen.query_one("#agent-header").render())


def shown_text(screen: AgentScreen) -> str:
    """Everything the screen's transcript shows as text (Markdown by its source)."""
    parts = []
    for widget in screen.query("#agent-transcript *"):
        parts.append(
            widget.source if isinstance(widget, AssistantMessage) else str(widget.render())
        )
    return "\n".join(parts)


def delegate(llm, prompt: str = "read the notes") -> None:
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": prompt, "description": "notes reader"})
            ]
        ),
        Reply(text="waiting for the reader"),
    )
    llm.respond = lambda body: Reply(text="noted")


async def test_the_screen_streams_a_running_child_and_cancels_it(llm, make_app, workspace):
    opened = threading.Event()  # the child's first reply waits for the screen
    llm.route(
        is_child,
        Reply(
            reasoning="weighing notes.txt",
            tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})],
            fault=Fault.hold(0, until=opened),
        ),
        Reply(fault=Fault.stall(seconds=20)),
    )
    delegate(llm)
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        screen = await open_agent_screen(pilot, app)
        # Opened before the child's first reply: what follows arrives from its live events.
        assert not screen.query(ToolCell)
        assert screen.focused is screen.query_one("#agent-message")
        assert enabled(screen) == {"agent-message", "send", "interrupt", "cancel", "back"}
        opened.set()

        await wait_for(
            pilot,
            lambda: (
                screen.query(ToolCell)
                and "hello" in str(screen.query_one(ToolCell).output.render())
            ),
        )
        cell = screen.query_one(ToolCell)
        assert "path: notes.txt" in str(cell.arguments.render())
        assert str(cell.title).startswith("✓ read_file notes.txt")
        thinking = screen.query_one(Reasoning)
        assert thinking.collapsed and thinking.thinking == "weighing notes.txt"
        await wait_for(pilot, lambda: len(child_requests(llm)) == 2)

        # The assignment is shown, the system prompt and the raw assignment message never.
        text = shown_text(screen)
        assert "read the notes" in text and "notes reader" in text
        assert "Assignment metadata" not in text
        system_prompt = child_requests(llm)[0]["messages"][0]["content"]
        assert system_prompt.splitlines()[0] not in text

        await pilot.click("#cancel")
        await wait_for(pilot, lambda: "cancelled" in header(screen))
        assert enabled(screen) == {"back"}
        assert any(str(n.render()).startswith("cancelled") for n in screen.query(Notice))
        # Followed, not rebuilt: the same cells, once each.
        assert screen.query_one(ToolCell) is cell and screen.query_one(Reasoning) is thinking
        await pilot.press("escape")
        await wait_for(pilot, lambda: str(app.query_one(AgentRow).render()).startswith("⊘"))
        await app.action_quit()


async def test_opened_mid_run_it_shows_the_history_once_then_follows(llm, make_app, workspace):
    llm.route(
        is_child,
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]),
        Reply(
            text="Now the edit.",
            tool_calls=[
                ToolCallSpec(
                    "edit_file",
                    {"path": "notes.txt", "old_string": "hello", "new_string": "hello there"},
                )
            ],
            request_delay=1.5,
        ),
        Reply(fault=Fault.stall(seconds=20)),
    )
    delegate(llm)
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: len(child_requests(llm)) == 2)
        screen = await open_agent_screen(pilot, app)
        # The step already taken comes from the child's conversation so far.
        history = screen.query_one(ToolCell)
        assert "hello" in str(history.output.render())
        assert not screen.query(DiffView)

        await wait_for(pilot, lambda: bool(screen.query(DiffView)))
        await wait_for(pilot, lambda: not str(screen.query(ToolCell)[-1].title).startswith("…"))
        cells = list(screen.query(ToolCell))
        assert [c.name_ for c in cells] == ["read_file", "edit_file"]
        assert cells[0] is history
        assert str(cells[1].output.render()) == "Edited notes.txt."
        diff = screen.query_one(DiffView)
        assert diff.title == "notes.txt [green]+1[/] [red]−1[/]" and diff.collapsed
        assert "+hello there" in diff.diff
        assert screen.query_one(AssistantMessage).source == "Now the edit."
        assert (workspace / "notes.txt").read_text() == "hello there\n"
        await app.action_quit()


async def test_messages_reach_the_child_and_actions_follow_its_state(llm, make_app, workspace):
    # The message arrives while the first answer streams, so the child takes one more step.
    llm.route(is_child, Reply(text=REPORT, request_delay=2.0), Reply(text=REPORT))
    delegate(llm)
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        screen = await open_agent_screen(pilot, app)
        screen.query_one("#agent-message", Input).value = "also check README"
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(screen.query(UserMessage)))
        assert str(screen.query_one(UserMessage).render()) == "› steer  also check README"
        await wait_for(pilot, lambda: "completed" in header(screen))
        assert any(
            "also check README" in str(m.get("content"))
            for m in child_requests(llm)[-1]["messages"]
        )
        # Finished: what is left is to continue it with a message, or to go back.
        assert enabled(screen) == {"revive", "back"}
        assert screen.focused is screen.query_one("#revive")
        await app.action_quit()


async def test_typing_past_the_message_box_scrolls_it_without_laying_out_the_screen(
    llm, make_app, workspace
):
    llm.route(is_child, Reply(fault=Fault.stall(seconds=30)))
    delegate(llm)
    app = make_app(workspace)
    async with app.run_test(size=(60, 30)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.runtime.agents()))
        # Narrow, the Work sidebar is folded away: the screen is opened as its row would.
        await app.push_screen(AgentScreen(app.runtime.agents()[0].agent_id))
        screen = app.screen
        await pilot.pause()
        box = screen.query_one("#agent-message", Input)
        box.focus()
        await pilot.pause()
        layouts = Layouts(screen)
        typed = "x" * 69 + "y"
        await pilot.press(*typed)
        assert box.value == typed
        # The end being typed is in view, as in Textual's own Input: scrolled, the last
        # character shown, the cursor just after it.
        region = box.content_region
        assert box.scroll_x > 0 and region.x <= box.cursor_screen_offset.x <= region.right
        assert str(box.render_line(0).text).rstrip().endswith("xy")
        # A layout per key laid the whole screen out 70 times.
        assert layouts.count < 10
        await app.action_quit()


async def test_the_sub_agent_cell_in_the_transcript_opens_the_screen(llm, make_app, workspace):
    llm.route(is_child, Reply(text=REPORT))
    delegate(llm)
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: not app.turn_running and bool(app.query(AgentCell)))
        cell = app.query_one(AgentCell)
        cell.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
        assert app.screen.agent_id == cell.agent_id
        await app.action_quit()


async def test_watch_agent_gives_one_childs_engine_events_until_unsubscribed(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.route(is_child, Reply(text=["SUMMARY: done", REPORT[len("SUMMARY: done") :]]))
    runtime = open_runtime(workspace=workspace)
    try:
        agent_id = runtime.manager.open({"prompt": "watch me"})["agent_id"]
        kept: list = []
        dropped: list = []
        runtime.watch_agent(agent_id, kept.append)
        runtime.watch_agent(agent_id, dropped.append)()  # unsubscribed at once
        await runtime.manager.evaluate({"agent_id": agent_id, "block": True})
        streamed = "".join(e.text for e in kept if isinstance(e, events.AssistantDelta))
        assert streamed == REPORT
        assert [type(e) for e in kept if isinstance(e, events.TurnComplete)] == [
            events.TurnComplete
        ]
        assert dropped == []
        assert runtime.agent_messages(agent_id)[-1] == {"role": "assistant", "content": REPORT}
    finally:
        await runtime.close()


def test_agent_cell_preview_shows_the_latest_tail_not_a_concatenation():
    cell = AgentCell("agent_1", "Moby · general · notes")
    # Progress envelopes carry the whole tail each time, not the new fragment.
    cell.progress("Reading the no")
    cell.progress("Reading the notes now.\nThey say hello")
    assert str(cell.render()) == (
        "⧉ Moby · general · notes\n  │ Reading the notes now.\n  │ They say hello\n  └ running"
    )
    cell.progress("x" * 300)
    assert str(cell.render()).splitlines()[1] == "  │ …" + "x" * 120


# -- snapshot ----------------------------------------------------------------------------------


def test_snapshot_agent_screen_mid_stream(snap_compare, llm, monkeypatch):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    (FIXED / "notes.txt").write_text("hello\n")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.route(
        is_child,
        Reply(
            reasoning="The notes file is short; read it whole.",
            tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})],
            usage={"prompt_tokens": 800, "completion_tokens": 20},
        ),
        # The answer starts, then stalls: the snapshot is taken mid-stream.
        Reply(
            text=["The notes say **hello**, ", "and nothing else."],
            chunk_delay=30,
            request_delay=0.5,  # past the progress throttle, so the header says "writing"
        ),
    )
    delegate(llm)
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)

    async def run_before(pilot):
        await type_and_send(pilot, "delegate")
        screen = await open_agent_screen(pilot, app)
        await wait_for(pilot, lambda: bool(screen.query(AssistantMessage)))
        await wait_for(pilot, lambda: "hello" in screen.query_one(AssistantMessage).source)
        await wait_for(pilot, lambda: "step 2 · writing" in header(screen))
        for cell in screen.query(ToolCell):  # durations vary from run to run
            cell.title = cell.title.rsplit("  ", 1)[0]
        screen.query_one("#agent-message").cursor_blink = False
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(110, 30), run_before=run_before)
