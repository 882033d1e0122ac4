"""Paint first: the app draws and takes keys before its session is open.

The session is held shut here until the test opens it, so the window between the first
frame and a ready session (a few hundred ms in a real start) can be looked at.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from textual import events
from textual.app import ScreenStackError
from textual.css.query import NoMatches

from codewhale.config import load_config
from codewhale.tui import app as app_module
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.launch import check
from codewhale.tui.launch_receipt import Appearance
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import Notice, UserMessage
from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY


class HeldShut(CodeWhaleApp):
    """Opens its session only once `opening` is set."""

    CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))  # not beside this file

    def __init__(self, *args, opening: asyncio.Event, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opening = opening

    async def open_runtime(self, loaded=None) -> None:
        await self.opening.wait()
        await super().open_runtime(loaded)


async def until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def status(app: CodeWhaleApp) -> str:
    return str(app.query_one(StatusLine).render())


def painted(app: CodeWhaleApp) -> bool:
    """The first frame is drawn: the composer has been laid out."""
    try:
        return app.composer.region.area > 0
    except (NoMatches, ScreenStackError):  # not composed yet
        return False


async def test_a_prompt_sent_while_starting_goes_out_once_the_session_opens(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="hi there"))
    opening = asyncio.Event()
    app = HeldShut(load_config(workspace=workspace), workspace, opening=opening)
    running = asyncio.create_task(app.run_async(headless=True, size=(120, 30)))
    try:
        await until(lambda: painted(app))
        assert "starting…" in status(app)
        for char in "hello":
            app.post_message(events.Key(char, char))
        await until(lambda: app.composer.text == "hello")  # typing is echoed meanwhile
        app.post_message(events.Key("enter", None))
        await until(lambda: app.composer.text == "")
        await asyncio.sleep(0.2)
        assert app.runtime is None and not llm.requests
        assert not app.query(UserMessage) and not app.query(Notice)  # held, not refused

        opening.set()
        await until(lambda: len(llm.requests) == 1 and not app.turn_running)
        assert llm.requests[0].json["messages"][-1] == {"role": "user", "content": "hello"}
        assert [m.render().plain for m in app.query(UserMessage)] == ["› hello"]
        assert "starting…" not in status(app) and "deepseek" in status(app)
    finally:
        opening.set()
        await until(lambda: app.session_ready.is_set())
        await app.action_quit()
        await running


async def test_a_session_that_cannot_open_says_so_in_the_status_line(monkeypatch, workspace):
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, resume="sess_nope")
    async with app.run_test(size=(120, 30)) as pilot:
        assert app.runtime is None
        assert "no session" in status(app) and "starting…" not in status(app)
        await pilot.press("h", "i", "enter")
        notices = [str(n.render()) for n in app.query(Notice)]
        assert any("No session is open" in n for n in notices)
        await app.action_quit()


# -- the status line a receipt remembers ------------------------------------------------------


def checked(workspace: Path) -> object:
    """What `codewhale` would start the app with (tui/launch.py)."""
    return check(argparse.Namespace(workspace_path=workspace, overrides={}, resume=None))


async def first_frame_status(app: HeldShut) -> tuple[str, str]:
    """The status line at the first frame (the session held shut) and once it has opened."""
    running = asyncio.create_task(app.run_async(headless=True, size=(120, 30)))
    try:
        await until(lambda: painted(app))
        at_first_frame = status(app)
        assert app.runtime is None
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        return at_first_frame, status(app)
    finally:
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        await app.action_quit()
        await running


async def test_a_new_session_paints_its_status_line_in_the_first_frame(llm, monkeypatch, workspace):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    first = checked(workspace)  # a first start: the config is checked, then a receipt kept
    assert not isinstance(first, Appearance)
    frame, opened = await first_frame_status(HeldShut(first, workspace, opening=asyncio.Event()))
    assert "starting…" in frame and "deepseek" in opened

    # The session's status line is kept with the receipt, once the session has opened.
    await until(lambda: getattr(checked(workspace), "status", None) is not None)
    again = checked(workspace)
    assert isinstance(again, Appearance)
    frame, then = await first_frame_status(HeldShut(again, workspace, opening=asyncio.Event()))
    assert frame == then == opened  # drawn before the session opened, unchanged by it

    # A resumed session's counters are in its file: its line waits for it to be read (and
    # is then drawn as it opens, see test_early_history.py), never a new session's.
    resumed = HeldShut(again, workspace, continue_latest=True, opening=asyncio.Event())
    frame, then = await first_frame_status(resumed)
    assert ("starting…" in frame or frame == then) and "deepseek" in then


def welcomes(app: CodeWhaleApp) -> list[str]:
    return [str(notice.render()) for notice in app.query(".welcome").results(Notice)]


async def first_frame_screen(app: HeldShut) -> tuple[tuple[str, list[str]], tuple[str, list[str]]]:
    """The status line and welcome lines at the first frame (the session held shut) and
    once the session has opened."""
    running = asyncio.create_task(app.run_async(headless=True, size=(120, 30)))
    try:
        await until(lambda: painted(app))
        at_first_frame = status(app), welcomes(app)
        assert app.runtime is None
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        return at_first_frame, (status(app), welcomes(app))
    finally:
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        await app.action_quit()
        await running


async def remembered_status(workspace: Path) -> str:
    """Start once with the checks run, and wait until the receipt keeps its status line."""
    first = checked(workspace)
    _, (opened, _) = await first_frame_screen(HeldShut(first, workspace, opening=asyncio.Event()))
    await until(lambda: getattr(checked(workspace), "status", None) is not None)
    return opened


async def test_a_receipt_paints_the_welcome_line_in_the_first_frame_too(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    opened = await remembered_status(workspace)
    again = checked(workspace)
    frame, then = await first_frame_screen(HeldShut(again, workspace, opening=asyncio.Event()))
    assert frame == then  # the whole screen as it stays, before the session opened
    status_line, welcome_lines = frame
    assert status_line == opened
    assert len(welcome_lines) == 1 and "/help for commands" in welcome_lines[0]


async def test_a_changed_config_paints_the_workspaces_last_status_line(
    llm, monkeypatch, workspace, isolated_home
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    opened = await remembered_status(workspace)
    config = isolated_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[tui]\ntheme = "nord"\n')  # a change the status line does not show
    changed = checked(workspace)
    assert not isinstance(changed, Appearance)  # a miss: the config is checked again
    frame, then = await first_frame_screen(HeldShut(changed, workspace, opening=asyncio.Event()))
    assert frame == then and frame[0] == opened

    # One that names another model is drawn once the session says so.
    config.write_text('model = "deepseek-v4-flash"\n')
    other = checked(workspace)
    frame, then = await first_frame_screen(HeldShut(other, workspace, opening=asyncio.Event()))
    assert "starting…" in frame[0] and not frame[1]
    assert "deepseek-v4-flash" in then[0] and len(then[1]) == 1


async def test_a_welcome_drawn_from_the_receipt_goes_when_the_session_cannot_open(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    await remembered_status(workspace)
    app = HeldShut(checked(workspace), workspace, opening=asyncio.Event())
    running = asyncio.create_task(app.run_async(headless=True, size=(120, 30)))
    try:
        await until(lambda: painted(app))
        assert len(welcomes(app)) == 1
        shutil.rmtree(workspace)  # gone before the session opens: it cannot
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        assert "no session" in status(app)
        assert not welcomes(app)
    finally:
        app.opening.set()
        await app.action_quit()
        await running
