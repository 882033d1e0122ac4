"""Long work ending while the terminal is unfocused rings the bell or asks for a desktop
notification; what reaches the terminal is observed at Textual's driver."""

from __future__ import annotations

import pytest
from textual import events
from textual.drivers.headless_driver import HeadlessDriver

from codewhale.tui import notify
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for


@pytest.fixture
def terminal(monkeypatch):
    """Everything the app writes to its terminal (the headless driver otherwise drops it)."""
    written: list[str] = []
    monkeypatch.setattr(HeadlessDriver, "write", lambda driver, data: written.append(data))
    # Every test turn is short: here any finished work counts as long.
    monkeypatch.setattr(notify, "MIN_SECS", 0.0)
    monkeypatch.setenv("TERM", "xterm-256color")
    return written


def configure(isolated_home, notify_setting: str) -> None:
    path = isolated_home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[tui]\nnotify = "{notify_setting}"\n')


async def blur(pilot, app) -> None:
    # A key or a click tells Textual the user is back: after this, turns start without one.
    app.post_message(events.AppBlur())
    await wait_for(pilot, lambda: not app.app_focus)


def told(terminal: list[str]) -> list[str]:
    """Our notifications among what was written (Textual writes pointer shapes too)."""
    return [s for s in terminal if s == "\a" or s.startswith(("\x1b]9;", "\x1b]777;"))]


async def test_desktop_notifications_for_a_turn_and_a_child_while_unfocused(
    llm, make_app, workspace, isolated_home, terminal
):
    configure(isolated_home, "desktop")
    llm.route(is_child, Reply(text=REPORT))
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "look", "description": "look \x1b[2Jaround"})
            ]
        ),
    )
    llm.respond = lambda body: Reply(text="\x1b]0;owned\x07All done\nsecond line")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await blur(pilot, app)
        await app.start_turn("delegate")
        await wait_for(pilot, lambda: len(told(terminal)) == 2, timeout=20)
        (child,) = app.runtime.agents()
        said = told(terminal)
        assert f"\x1b]9;CodeWhale: {child.nickname} completed: look [2Jaround\a" in said
        assert "\x1b]9;CodeWhale: turn completed: ]0;ownedAll done\a" in said
        assert not any("\x1b]0;owned" in s or "\x1b[2J" in s for s in terminal)
        await app.action_quit()


async def test_the_bell_rings_only_while_the_terminal_is_unfocused(
    llm, make_app, workspace, terminal
):
    llm.respond = lambda body: Reply(text="done")
    app = make_app(workspace)  # notify = "bell" by default
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "focused")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 1)
        assert told(terminal) == []
        await blur(pilot, app)
        await app.start_turn("unfocused")
        await wait_for(pilot, lambda: told(terminal) == ["\a"])
        app.post_message(events.AppFocus())
        await wait_for(pilot, lambda: app.app_focus)
        await app.start_turn("focused again")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 3)
        assert told(terminal) == ["\a"]
        await app.action_quit()


async def test_notify_off_writes_nothing(llm, make_app, workspace, isolated_home, terminal):
    configure(isolated_home, "off")
    llm.respond = lambda body: Reply(text="done")
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await blur(pilot, app)
        await app.start_turn("hi")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 1)
        assert told(terminal) == []
        await app.action_quit()
