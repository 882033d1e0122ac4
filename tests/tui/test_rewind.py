"""/rewind in the app: the picker of earlier prompts, the choice, and what comes back."""

from __future__ import annotations

import shutil
import tempfile
import time
import types
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.runtime import rewind as rewind_module
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.escape_twice import EscapeTwice
from codewhale.tui.rewind_screen import RewindChoice, RewindPicker
from codewhale.tui.transcript import UserMessage
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-rewind"


def write(path: str, content: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec("write_file", {"path": path, "content": content})])


def prompts_shown(app) -> list[str]:
    return [str(message.render()) for message in app.query(UserMessage)]


async def test_rewind_both_restores_conversation_and_files_and_refills_the_composer(
    llm, make_app, workspace
):
    llm.enqueue(
        write("first.txt", "one\n"),
        Reply(text="Wrote the first."),
        write("second.txt", "two\n"),
        write("notes.txt", "changed\n"),
        Reply(text="Wrote the second."),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "write the first file")
        await wait_for(pilot, lambda: not app.turn_running and len(app.runtime.messages) > 3)
        kept = list(app.runtime.messages)
        await type_and_send(pilot, "write the second file")
        await wait_for(pilot, lambda: not app.turn_running and (workspace / "second.txt").exists())
        await wait_for(pilot, lambda: not app.turn_running)

        await type_and_send(pilot, "/rewind")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindPicker))
        await pilot.press("enter")  # the newest prompt is highlighted first
        await wait_for(pilot, lambda: isinstance(app.screen, RewindChoice))
        await pilot.press("enter")  # conversation and files
        await wait_for(pilot, lambda: app.composer.text == "write the second file")

        assert not (workspace / "second.txt").exists()
        assert (workspace / "notes.txt").read_text() == "hello\n"
        assert (workspace / "first.txt").read_text() == "one\n"
        assert app.runtime.messages == kept
        assert prompts_shown(app) == ["› write the first file"]
        await app.action_quit()


async def test_escape_twice_on_an_empty_composer_opens_the_picker(
    llm, make_app, workspace, monkeypatch
):
    # The pair's window is the user's; Pilot on a loaded machine may be slower.
    monkeypatch.setattr(EscapeTwice, "WINDOW_SECS", 60.0)
    llm.enqueue(Reply(text="Hi."))
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await type_and_send(pilot, "say hi")
        await wait_for(pilot, lambda: not app.turn_running and len(app.runtime.messages) > 2)
        app.composer.text = "draft"
        await pilot.press("escape")  # clears the draft: not the first of a pair
        assert app.composer.text == "" and not isinstance(app.screen, RewindPicker)
        await pilot.press("escape")
        assert not isinstance(app.screen, RewindPicker)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindPicker))
        await pilot.press("escape")  # cancels the picker
        await wait_for(pilot, lambda: not isinstance(app.screen, RewindPicker))
        await app.action_quit()


async def test_rewind_with_no_earlier_prompt_says_so(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await type_and_send(pilot, "/rewind")
        last = lambda: app.transcript.children[-1]  # noqa: E731
        await wait_for(pilot, lambda: "No earlier prompt" in str(last().render()))
        assert not isinstance(app.screen, RewindPicker)
        await app.action_quit()


@pytest.fixture
def fixed_clock(monkeypatch):
    """Prompts sent at 14:05:09 local time, whatever the hour the snapshot is taken."""
    sent_at = time.mktime((2026, 11, 27, 14, 5, 9, 0, 0, -1))
    monkeypatch.setattr(rewind_module, "time", types.SimpleNamespace(time=lambda: sent_at))


def test_snapshot_rewind_picker(snap_compare, llm, monkeypatch, fixed_clock, fixed_usage):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="Read it."), Reply(text="Summarised."))
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.runtime is not None)
        await type_and_send(pilot, "read the notes")
        await wait_for(pilot, lambda: not app.turn_running and len(app.runtime.messages) > 2)
        await type_and_send(pilot, "summarise them in one line")
        await wait_for(pilot, lambda: not app.turn_running and len(app.runtime.messages) > 4)
        await type_and_send(pilot, "/rewind")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindPicker))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(110, 28), run_before=run_before)
