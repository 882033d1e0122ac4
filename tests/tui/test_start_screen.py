"""The first screen: a welcome line on a new session (not on resume), and `--mode`."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from codewhale.cli import parse_arguments
from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.launch import start_mode
from codewhale.tui.transcript import Notice, UserMessage
from codewhale.tui.yolo_confirm import YoloConfirmScreen
from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-start"


def welcome_lines(app: CodeWhaleApp) -> list[str]:
    return [str(n.render()) for n in app.query(Notice) if "/help for commands" in str(n.render())]


@pytest.fixture
def start_app(llm, monkeypatch):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)

    def make(workspace: Path, **options) -> CodeWhaleApp:
        return CodeWhaleApp(load_config(workspace=workspace), workspace, **options)

    return make


async def test_a_new_session_shows_one_welcome_line_and_a_resumed_one_none(
    llm, start_app, workspace
):
    llm.enqueue(Reply(text="hi"))
    app = start_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        [line] = welcome_lines(app)
        assert str(workspace) in line or "~" in line
        assert app.runtime.model in line and "agent mode" in line
        await type_and_send(pilot, "hello")
        await wait_for(pilot, lambda: not app.turn_running)
        session_id = app.runtime.info.id
        await app.action_quit()
    again = start_app(workspace, resume=session_id)
    async with again.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: bool(again.query(UserMessage)))
        assert welcome_lines(again) == []
        await again.action_quit()


async def test_mode_plan_opens_the_session_in_plan(start_app, workspace):
    app = start_app(workspace, mode=Mode.PLAN)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        assert app.runtime.mode is Mode.PLAN
        assert "plan mode" in welcome_lines(app)[0]
        await app.action_quit()


@pytest.mark.parametrize(("key", "mode"), [("y", Mode.YOLO), ("n", Mode.AGENT)])
async def test_mode_yolo_asks_first_and_the_first_prompt_waits_for_the_answer(
    llm, start_app, workspace, key, mode
):
    llm.enqueue(Reply(text="done"))
    app = start_app(workspace, mode=Mode.YOLO, initial_prompt="tidy up")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, YoloConfirmScreen))
        # Opened in Agent mode; nothing is sent while the question is open.
        assert app.runtime.mode is Mode.AGENT
        assert not app.turn_running and llm.requests == []
        await pilot.press(key)
        await wait_for(pilot, lambda: len(llm.requests) == 1 and not app.turn_running)
        assert app.runtime.mode is mode
        await app.action_quit()


def test_the_mode_flag_is_the_apps_and_execs():
    assert start_mode(parse_arguments(["--mode", "plan", "fix it"])) is Mode.PLAN
    assert start_mode(parse_arguments(["--mode", "yolo"])) is Mode.YOLO
    assert start_mode(parse_arguments([])) is None
    # Before `exec` or after it, exec gets it.
    assert parse_arguments(["--mode", "plan", "exec", "hi"]).mode == "plan"
    assert parse_arguments(["exec", "--mode", "yolo", "hi"]).mode == "yolo"


def test_snapshot_welcome_line(snap_compare, start_app):
    FIXED.mkdir(exist_ok=True)
    app = start_app(FIXED, mode=Mode.PLAN)

    async def run_before(pilot):
        await wait_for(pilot, lambda: bool(welcome_lines(app)))
        app.composer.cursor_blink = False
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(140, 12), run_before=run_before)
