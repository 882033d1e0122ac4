"""Modes in the app: Tab toggles Plan ↔ Agent, YOLO only by `/mode yolo` and a confirmation."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import Notice
from codewhale.tui.yolo_confirm import YoloConfirmScreen
from tests.support.settings import TEST_KEY
from tests.tui.conftest import wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-modes"


def status(app: CodeWhaleApp) -> str:
    return str(app.query_one(StatusLine).render())


def notices(app: CodeWhaleApp) -> list[str]:
    return [str(n.render()) for n in app.query(Notice)]


async def send(pilot, app: CodeWhaleApp, text: str) -> None:
    """Put `text` in the composer and press Enter."""
    app.composer.focus()
    app.composer.text = text
    app.composer.move_cursor(app.composer.document.end)
    await pilot.press("enter")


async def test_tab_on_an_empty_composer_toggles_plan_and_agent_and_never_reaches_yolo(
    make_app, workspace
):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        app.composer.focus()
        seen = []
        for _ in range(4):
            await pilot.press("tab")
            await pilot.pause()
            seen.append(app.runtime.mode)
            assert f" {app.runtime.mode.value.upper()} " in status(app)
        assert seen == [Mode.PLAN, Mode.AGENT, Mode.PLAN, Mode.AGENT]
        await app.action_quit()


async def test_tab_from_yolo_steps_down_to_agent_without_asking(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        app.runtime.set_mode(Mode.YOLO)
        app.composer.focus()
        await pilot.press("tab")
        await pilot.pause()
        assert app.runtime.mode is Mode.AGENT
        assert not isinstance(app.screen, YoloConfirmScreen)
        await app.action_quit()


async def test_bare_mode_lists_the_choices_and_changes_nothing(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, "/mode")
        await wait_for(pilot, lambda: any(n.startswith("mode: agent") for n in notices(app)))
        listing = next(n for n in notices(app) if n.startswith("mode: agent"))
        choices = [line.lstrip(" ▸").split()[0] for line in listing.splitlines()[1:4]]
        assert choices == ["plan", "agent", "yolo"]
        assert "▸ agent" in listing
        assert app.runtime.mode is Mode.AGENT
        assert " AGENT " in status(app)
        await app.action_quit()


async def test_mode_yolo_asks_and_n_keeps_the_mode(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, "/mode yolo")
        await wait_for(pilot, lambda: isinstance(app.screen, YoloConfirmScreen))
        assert app.runtime.mode is Mode.AGENT  # nothing changes while it asks
        await pilot.press("n")
        await wait_for(pilot, lambda: any("YOLO not entered" in n for n in notices(app)))
        assert app.runtime.mode is Mode.AGENT
        assert app.runtime.engine.context.modes.current is Mode.AGENT
        assert " AGENT " in status(app)
        await app.action_quit()


async def test_mode_yolo_asks_and_y_switches(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, "/mode plan")
        await send(pilot, app, "/mode yolo")
        await wait_for(pilot, lambda: isinstance(app.screen, YoloConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.runtime.mode is Mode.YOLO)
        assert app.runtime.engine.context.modes.current is Mode.YOLO
        await wait_for(pilot, lambda: " YOLO " in status(app))
        # Leaving YOLO asks nothing.
        await send(pilot, app, "/mode agent")
        await wait_for(pilot, lambda: app.runtime.mode is Mode.AGENT)
        assert not isinstance(app.screen, YoloConfirmScreen)
        await app.action_quit()


async def test_escape_cancels_the_yolo_confirmation(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, "/mode yolo")
        await wait_for(pilot, lambda: isinstance(app.screen, YoloConfirmScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, YoloConfirmScreen))
        assert app.runtime.mode is Mode.AGENT
        await app.action_quit()


async def test_an_unknown_mode_is_named_with_the_choices(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, "/mode turbo")
        await wait_for(pilot, lambda: any("Unknown mode 'turbo'" in n for n in notices(app)))
        assert "/mode plan, /mode agent or /mode yolo" in notices(app)[-1]
        assert app.runtime.mode is Mode.AGENT
        await app.action_quit()


@pytest.fixture
def fixed_app(llm, monkeypatch):
    FIXED.mkdir(exist_ok=True)
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return lambda: CodeWhaleApp(load_config(workspace=FIXED), FIXED)


def test_snapshot_yolo_confirmation(snap_compare, fixed_app):
    app = fixed_app()

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, "/mode yolo")
        await wait_for(pilot, lambda: isinstance(app.screen, YoloConfirmScreen))
        app.composer.cursor_blink = False
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)
