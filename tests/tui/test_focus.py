"""Where keys go: text typed away from the composer reaches it; Tab changes the mode only
from an empty, focused composer."""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from codewhale.permissions import Mode
from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import AgentCell, ToolCell, UserMessage
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.tui.conftest import is_child, open_agent_screen, type_and_send, wait_for

STALL = Reply(fault=Fault.stall(seconds=30))


def burst(app: CodeWhaleApp, text: str) -> None:
    """Keys as the terminal delivers fast typing: all queued before the first is handled."""
    assert app._driver is not None
    for char in text:
        key = events.Key("space" if char == " " else char, char)
        key.set_sender(app)
        app._driver.send_message(key)


async def a_turn_with_a_tool_cell(llm, app: CodeWhaleApp, pilot) -> None:
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]),
        Reply(text="read it"),
    )
    await type_and_send(pilot, "read notes")
    await wait_for(pilot, lambda: not app.turn_running and bool(app.query(ToolCell)))


async def test_typing_after_shift_tab_into_the_transcript_goes_on_in_the_composer(
    llm, make_app, workspace
):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await a_turn_with_a_tool_cell(llm, app, pilot)
        await pilot.press("h", "e")
        await pilot.press("shift+tab")
        assert app.focused is not app.composer
        burst(app, "llo world")
        await wait_for(pilot, lambda: app.composer.text == "hello world")
        assert app.focused is app.composer
        assert app.runtime.mode is Mode.AGENT
        # A paste there lands in the composer too.
        await pilot.press("shift+tab")
        assert app.focused is not app.composer
        app._driver.send_message(events.Paste(", again"))
        await wait_for(pilot, lambda: app.composer.text == "hello world, again")
        await app.action_quit()


async def test_typing_on_a_focused_cell_or_row_reaches_the_composer_from_the_first_key(
    llm, make_app, workspace
):
    llm.route(is_child, STALL)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "long survey"})]),
        Reply(text="waiting"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "go")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)) and bool(app.query(AgentCell)))
        app.query_one(AgentCell).focus()
        await pilot.pause()
        burst(app, "abc")
        await wait_for(pilot, lambda: app.composer.text == "abc")
        app.query_one(AgentRow).focus()
        await pilot.pause()
        burst(app, " def")
        await wait_for(pilot, lambda: app.composer.text == "abc def")
        assert app.focused is app.composer
        # Nothing opened an agent screen on the way.
        assert app.screen is app.screen_stack[0]
        await app.action_quit()


async def test_leaving_an_agent_screen_gives_the_composer_the_focus(llm, make_app, workspace):
    llm.route(is_child, STALL)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "long survey"})]),
        Reply(text="waiting"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "go")
        screen = await open_agent_screen(pilot, app)
        # On the agent screen, text typed on a button goes to its message box.
        screen.query_one("#back").focus()
        await pilot.pause()
        burst(app, "hi")
        box = screen.query_one("#agent-message", Input)
        await wait_for(pilot, lambda: box.value == "hi")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, AgentScreen))
        assert app.focused is app.composer
        burst(app, "next task")
        await wait_for(pilot, lambda: app.composer.text == "next task")
        # Enter sends it (the turn waits on the child: as steering); the row that opened
        # the screen does not open it again.
        await pilot.press("enter")
        await wait_for(pilot, lambda: "next task" in str(app.query(UserMessage).last().render()))
        assert app.composer.text == ""
        assert not isinstance(app.screen, AgentScreen)
        await app.action_quit()


async def test_tab_on_a_draft_or_away_from_the_composer_keeps_the_mode(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await a_turn_with_a_tool_cell(llm, app, pilot)
        # A draft: Tab is completion's, never the mode's.
        await pilot.press("w", "h", "y", "tab")
        assert app.runtime.mode is Mode.AGENT
        assert app.composer.text == "why"
        # Away from the composer Tab moves the focus, as everywhere.
        await pilot.press("ctrl+a", "backspace")  # the composer is empty again
        app.query_one(ToolCell).query_one("CollapsibleTitle").focus()
        await pilot.pause()
        before = app.focused
        await pilot.press("tab")
        assert app.focused is not before
        assert app.runtime.mode is Mode.AGENT
        await app.action_quit()
