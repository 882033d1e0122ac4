"""Background shell tasks in the TUI (issue 30, item 3): a Tasks row in the Work sidebar,
a screen with the task's live output and how it ended, `k` to kill it, and the quit
question that lists the running ones. The model starts them with a real exec_shell."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.quit_confirm import QuitScreen
from codewhale.tui.status import StatusLine
from codewhale.tui.task_rows import TaskRow
from codewhale.tui.task_screen import KillTaskScreen, TaskScreen
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.processes import daemon_marker, gone, kill_marked
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-tasks"
# The parent's requests spend nothing: the status line of the picture counts none.
NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0}


def waits_for(name: str, then: str = "") -> str:
    """A command that prints, then runs until the test creates `name` in the workspace."""
    return f"echo started; while [ ! -e {name} ]; do sleep 0.05; done; {then}".rstrip("; ")


def starts(*commands: str) -> Reply:
    return Reply(
        usage=NO_USAGE,
        tool_calls=[
            ToolCallSpec("exec_shell", {"command": command, "background": True})
            for command in commands
        ],
    )


def row_text(app, task_id: str) -> str:
    return str(app.query_one(f"#task-{task_id}", TaskRow).content)


@pytest.fixture
def marker() -> Iterator[str]:
    made = daemon_marker()
    yield made
    kill_marked(made)


async def start_tasks(app, pilot, llm, *commands: str) -> None:
    """The model starts `commands` in the background; the turn ends while they run."""
    # A task that ends during the turn is news the model may be asked about once more.
    llm.respond = lambda body: Reply(text="noted", usage=NO_USAGE)
    llm.enqueue(starts(*commands), Reply(text="started", usage=NO_USAGE))
    app.runtime.set_mode(Mode.YOLO)  # exec_shell runs unasked
    await type_and_send(pilot, "start them")
    await wait_for(
        pilot, lambda: not app.turn_running and len(app.sidebar.tasks.rows) == len(commands)
    )


async def test_a_task_gets_a_row_and_its_screen_follows_it_to_its_exit(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        assert not app.sidebar.tasks.display  # no task, no section
        await start_tasks(app, pilot, llm, waits_for("go", "echo X; exit 3"))
        assert app.sidebar.tasks.display
        await wait_for(pilot, lambda: "started" in row_text(app, "bg_1"))
        assert "running" in row_text(app, "bg_1")
        await pilot.click("#task-bg_1")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskScreen))
        screen = app.screen
        await wait_for(pilot, lambda: "started" in screen.output.lines)
        assert "running" in str(screen.header.content)
        (workspace / "go").touch()
        await wait_for(pilot, lambda: "X" in screen.output.lines)
        await wait_for(pilot, lambda: "exit 3" in str(screen.header.content))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, TaskScreen))
        # The task's end came as an event: the row says how it ended.
        await wait_for(pilot, lambda: "exit 3" in row_text(app, "bg_1"))
        assert "X" in row_text(app, "bg_1")
        await app.action_quit()


async def test_k_on_the_task_screen_kills_the_task_after_asking(llm, make_app, workspace, marker):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await start_tasks(app, pilot, llm, f"sleep {marker}")
        app.sidebar.tasks.rows["bg_1"].focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskScreen))
        screen = app.screen
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, KillTaskScreen))
        await pilot.press("s")  # kept running
        await wait_for(pilot, lambda: app.screen is screen)
        assert app.runtime.background_tasks()[0].running
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, KillTaskScreen))
        await pilot.press("k")
        await wait_for(pilot, lambda: "killed" in str(screen.header.content))
        assert await gone(marker)
        await app.action_quit()


async def test_quitting_lists_the_running_tasks_and_stops_them(llm, make_app, workspace, marker):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await start_tasks(app, pilot, llm, f"sleep {marker}", "echo done")
        await wait_for(pilot, lambda: "exit 0" in row_text(app, "bg_2"))
        await app.action_quit()
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.pause()
        shown = [str(line.content) for line in app.screen.query(".confirm-box > Static")]
        assert shown[0] == "Quit while 1 background task is still running?"
        # Only the running one: the ended one has nothing left to stop.
        assert any(f"bg_1  sleep {marker}" in line for line in shown)
        assert not any("bg_2" in line for line in shown)
        await pilot.press("q")
    assert await gone(marker)


# -- the picture ------------------------------------------------------------------------


@pytest.fixture
def fixed_workspace(llm, monkeypatch) -> Iterator[Path]:
    """One path in every run: the prompt carries it, and the status line its token count."""
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    yield FIXED
    shutil.rmtree(FIXED, ignore_errors=True)


def test_snapshot_a_running_and_an_ended_task_in_the_sidebar(
    snap_compare, llm, fixed_workspace, fixed_usage
):
    app = CodeWhaleApp(load_config(workspace=fixed_workspace), fixed_workspace)
    server = waits_for("stop-server")
    build = waits_for("stop-build", "echo build ok; exit 1")

    async def run_before(pilot):
        await start_tasks(app, pilot, llm, server, build)
        (fixed_workspace / "stop-build").touch()
        await wait_for(pilot, lambda: "exit 1" in row_text(app, "bg_2"))
        await type_and_send(pilot, "/clear")
        # Pinned: how long they ran depends on the machine.
        elapsed = {"bg_1": 42_000, "bg_2": 3_000}
        pinned = [
            replace(task, elapsed_ms=elapsed[task.task_id])
            for task in app.runtime.background_tasks()
        ]
        app.sidebar.tasks.source = lambda: pinned
        app.sidebar.tasks.show_tasks(pinned)
        app.clear_notifications()
        app.composer.focus()
        app.composer.cursor_blink = False
        await wait_for(pilot, lambda: not app.query_one(StatusLine).flashing)
        await pilot.pause(0.2)

    # The app's end stops the server task (tests/integration/test_background_tasks.py).
    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)
