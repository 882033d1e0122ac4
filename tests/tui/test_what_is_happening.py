"""The screen says what is happening: what a held-open turn waits on and what woke it, a
child gone quiet and why it ended, a finished child's SUMMARY, and an agent screen that
keeps a report's lines, counts steps right and shows a step already under way."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from codewhale.config import load_config
from codewhale.tui import sidebar
from codewhale.tui.answer import AssistantMessage, StreamedParagraph
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import AgentCell, Notice
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import is_child, open_agent_screen, type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-what-is-happening"
SUMMARY = "Mapped the three API routes and their handlers."
REPORT = (
    f"SUMMARY: {SUMMARY}\nCHANGES: None.\nEVIDENCE: src/routes.py:12\nRISKS: None.\nBLOCKERS: None."
)
STALL = Reply(fault=Fault.stall(seconds=60))
# What the parent answers once Moby's end wakes its turn.
WOKEN_ANSWER = "Moby is done; Humphrey is still going."
# The parent's own requests spend nothing: how many it makes depends on timing.
NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0}


def by_task(word: str):
    return lambda body: any(f"Task:\n{word}" in str(m.get("content")) for m in body["messages"])


def opens(*tasks: str) -> Reply:
    return Reply(
        usage=NO_USAGE,
        tool_calls=[
            ToolCallSpec("agent_open", {"prompt": task, "description": task}) for task in tasks
        ],
    )


def status_text(app) -> str:
    return str(app.query_one(StatusLine).render())


def answers(app) -> list[str]:
    return [message.source for message in app.transcript.query(AssistantMessage)]


def notices(app) -> list[str]:
    return [str(notice.render()) for notice in app.transcript.query(Notice)]


def cell_of(app, nickname: str) -> AgentCell:
    return next(cell for cell in app.query(AgentCell) if cell.heading.startswith(nickname))


def row_of(app, nickname: str) -> AgentRow:
    return next(row for row in app.query(AgentRow) if row.snapshot.nickname == nickname)


def asks_then_reports() -> tuple[Reply, Reply]:
    """A child that asks to run a command, then reports: it ends only once the user
    answers, so the test decides when (while the parent is seen waiting)."""
    ask = Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo routes"})])
    return ask, Reply(text=REPORT)


async def leave(app, pilot) -> None:
    """Quit, answering the question asked while children still run."""
    await app.action_quit()
    await pilot.pause()
    if app.is_running:
        await app.action_quit()


async def waiting_then_woken(app, pilot, llm) -> None:
    """Moby asks (then reports once denied), Humphrey stalls; the parent waits on both,
    Moby's end wakes it, then it waits on Humphrey."""
    llm.route(by_task("map"), *asks_then_reports())
    llm.route(by_task("stall"), STALL)
    llm.enqueue(opens("map the routes", "stall forever"), Reply(text="Both are on it."))
    llm.respond = lambda body: Reply(text=WOKEN_ANSWER)
    await type_and_send(pilot, "delegate")
    await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=20)
    await wait_for(pilot, lambda: "waiting on 2 sub-agents" in status_text(app), timeout=20)
    await pilot.press("n")
    await wait_for(pilot, lambda: "Moby finished — continuing" in notices(app), timeout=20)
    # The count drops to one as Moby ends, before the woken turn has answered: both are
    # waited for (on a busy machine the status line came first).
    await wait_for(pilot, lambda: WOKEN_ANSWER in answers(app), timeout=20)
    await wait_for(pilot, lambda: "waiting on 1 sub-agent " in status_text(app), timeout=20)


async def test_the_status_line_says_what_the_turn_waits_on_and_what_woke_it(
    llm, make_app, workspace
):
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await waiting_then_woken(app, pilot, llm)
        assert "working" not in status_text(app)
        # The marker stands between the answer before the wait and the one it woke.
        texts = [
            w.source if isinstance(w, AssistantMessage) else str(w.render())
            for w in app.transcript.query("AssistantMessage, Notice")
        ]
        marker = texts.index("Moby finished — continuing")
        assert texts[marker - 1] == "Both are on it."
        assert texts[marker + 1] == WOKEN_ANSWER

        # Esc ends the wait with no child finished: no marker, and no waiting either.
        await pilot.click("#composer")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.turn_running, timeout=20)
        assert notices(app).count("Moby finished — continuing") == 1
        assert not any("Humphrey" in text for text in notices(app))
        assert "waiting on" not in status_text(app)
        await leave(app, pilot)


async def test_a_finished_childs_cell_shows_its_summary(llm, make_app, workspace):
    llm.route(is_child, Reply(text=REPORT))
    llm.enqueue(opens("map the routes"))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: row_of(app, "Moby").snapshot.status == "completed")
        await wait_for(pilot, lambda: "completed" in str(cell_of(app, "Moby").render()))
        lines = str(cell_of(app, "Moby").render()).splitlines()
        assert lines[1:] == [f"  │ SUMMARY: {SUMMARY}", "  └ completed"]
        await leave(app, pilot)


async def test_a_quiet_child_says_so_on_its_row(llm, make_app, workspace, monkeypatch):
    llm.route(is_child, STALL)
    llm.enqueue(opens("stall forever"))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        row = row_of(app, "Moby")
        await wait_for(pilot, lambda: row.snapshot.status == "running")
        assert "no output" not in str(row.render())

        # The sidebar's clock 20 s on: the stalled stream has been quiet that long.
        monkeypatch.setattr(sidebar, "wall_clock", lambda: time.time() + 20)
        await wait_for(pilot, lambda: "no output for 2" in str(row.render()).splitlines()[1])
        await leave(app, pilot)


async def test_an_api_timeout_is_said_in_the_childs_cell(llm, make_app, workspace):
    llm.route(is_child, STALL)
    llm.enqueue(opens("stall forever"))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        app.runtime.manager.builder.api_timeout = 1.0
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentCell)))
        cell = app.query_one(AgentCell)
        await wait_for(pilot, lambda: "interrupted" in cell.footer, timeout=20)
        assert "API call timed out after 1000ms" in str(cell.render())
        await leave(app, pilot)


async def test_the_agent_screen_keeps_report_lines_and_counts_steps(llm, make_app, workspace):
    llm.route(is_child, Reply(text=REPORT))
    llm.enqueue(opens("map the routes"))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: row_of(app, "Moby").snapshot.status == "completed")
        screen = await open_agent_screen(pilot, app)
        await wait_for(pilot, lambda: bool(screen.query(StreamedParagraph)))
        paragraph = screen.query_one(StreamedParagraph)
        assert str(paragraph.render()).splitlines()[:2] == [
            f"SUMMARY: {SUMMARY}",
            "CHANGES: None.",
        ]
        header = str(screen.query_one("#agent-header").render())
        assert "· completed · 1 step ·" in header
        await leave(app, pilot)


async def test_an_agent_screen_opened_mid_step_shows_the_text_so_far(llm, make_app, workspace):
    llm.route(
        is_child,
        # The answer starts, then waits: the screen opens between its two parts.
        Reply(text=["Reading the routes, ", "then the handlers."], chunk_delay=30),
    )
    llm.enqueue(opens("map the routes"))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentCell)))
        await wait_for(pilot, lambda: "Reading the routes" in app.query_one(AgentCell).tail)
        screen = await open_agent_screen(pilot, app)
        await wait_for(pilot, lambda: bool(screen.query(AssistantMessage)))
        assert screen.query_one(AssistantMessage).source == "Reading the routes, "
        header = str(screen.query_one("#agent-header").render())
        assert "step 1 · writing" in header and "0 steps" not in header
        await leave(app, pilot)


# -- pictures ---------------------------------------------------------------------------


def test_snapshot_a_quiet_row_and_a_finished_summary(snap_compare, llm, monkeypatch, fixed_usage):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    (FIXED / "notes.txt").write_text("hello\n")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)
    app.NOTIFICATION_TIMEOUT = 0.5

    async def run_before(pilot):
        await waiting_then_woken(app, pilot, llm)
        quiet = row_of(app, "Humphrey")
        last_output = app.runtime.manager.last_output_at(quiet.agent_id)
        # The clock stopped 45 s after Humphrey's last output; each row's time pinned.
        now = last_output + 45.5
        monkeypatch.setattr(sidebar, "wall_clock", lambda: now)
        for row in app.query(AgentRow):
            snapshot = app.runtime.manager.snapshot_of(row.agent_id)
            app.sidebar.show_agent(replace(snapshot, elapsed_ms=50_000 if row is quiet else 4_000))
        app.clear_notifications()
        app.composer.focus()
        app.composer.cursor_blink = False
        await wait_for(pilot, lambda: not app.query_one(StatusLine).flashing)
        await wait_for(pilot, lambda: "no output for 45s" in str(quiet.render()))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(140, 34), run_before=run_before)
