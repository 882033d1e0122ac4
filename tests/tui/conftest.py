"""Shared pieces of the TUI tests: an app against the loopback LLM and Pilot helpers."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.providers import pricing
from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.armed import ArmedKeys
from codewhale.tui.sidebar import AgentRow
from tests.support import llm_server
from tests.support.settings import TEST_KEY

REPORT = "SUMMARY: done\nCHANGES: None.\nEVIDENCE:\n- a:1\nRISKS: none\nBLOCKERS: None."


def is_child(body) -> bool:
    return any("Assignment metadata" in str(m.get("content")) for m in body["messages"])


@pytest.fixture(autouse=True)
def dialog_keys_at_once(monkeypatch):
    """Pilot presses keys as soon as a dialog exists; the typing guard has its own test."""
    monkeypatch.setattr(ArmedKeys, "ARM_SECS", 0.0)


@pytest.fixture(autouse=True)
def off_peak_prices(monkeypatch):
    """Screens show the session's cost, which DeepSeek's peak hours double: the snapshots
    are of an off-peak session whatever the hour they run at (tests/unit/test_pricing.py
    covers the hours)."""
    monkeypatch.setitem(pricing.PEAK_HOURS, "deepseek", lambda at: False)


@pytest.fixture
def fixed_usage(monkeypatch):
    """Every loopback answer without usage of its own reports the same counts. By default
    the loopback counts a request's bytes, and a request carries durations and times that
    a busy machine lengthens by a digit: a picture's context % or cost would follow."""
    counts = {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240}

    def usage(handler, reply):
        return reply.usage if reply.usage is not None else counts

    monkeypatch.setattr(llm_server._Handler, "_usage", usage)


@pytest.fixture
def workspace():
    """A workspace whose path has the same length in every run: the prompt carries it, so
    the token counts, context % and costs the screens show must not change with pytest's
    run number or xdist worker (`/tmp/pytest-of-root/pytest-99/popen-gw1/...`)."""
    scratch = Path(tempfile.mkdtemp(prefix="codewhale-tui-"))
    root = scratch / "repo"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n")
    yield root
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def make_app(llm, monkeypatch):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)

    def make(workspace: Path) -> CodeWhaleApp:
        return CodeWhaleApp(load_config(workspace=workspace), workspace)

    return make


async def type_and_send(pilot, text: str) -> None:
    await pilot.click("#composer")
    for char in text:
        await pilot.press(char if char != " " else "space")
    await pilot.press("enter")


async def wait_for(pilot, condition, timeout: float = 60.0) -> None:
    """Return once `condition()` holds; `timeout` is a ceiling for a hang (generous, as
    a loaded machine is slow), never a measure."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await pilot.pause(0.02)


async def open_agent_screen(pilot, app) -> AgentScreen:
    """The first child's agent screen, opened as a click on its sidebar row opens it.

    The row is told it was selected rather than clicked at a position: a child that ends
    moves its row to the finished ones, and a click aimed before the move lands beside it
    (the screen then never opened, on a loaded machine)."""
    await wait_for(pilot, lambda: bool(app.query(AgentRow)))
    row = app.query_one(AgentRow)
    row.post_message(AgentRow.Selected(row.agent_id))
    await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
    screen = app.screen
    assert isinstance(screen, AgentScreen)
    await pilot.pause()
    return screen


class Layouts:
    """Counts the layouts of `screen` from now on (Textual's `Screen._refresh_layout`)."""

    def __init__(self, screen) -> None:
        self.count = 0
        refresh_layout = screen._refresh_layout

        def counted(*args, **kwargs):
            self.count += 1
            return refresh_layout(*args, **kwargs)

        screen._refresh_layout = counted


def completion_rows(app) -> list[str]:
    """The `/` or `@` list's rows as the user reads them; empty while it is closed."""
    from codewhale.tui.completion import CompletionMenu

    menu = app.query_one(CompletionMenu)
    if not menu.display:
        return []
    return [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]
