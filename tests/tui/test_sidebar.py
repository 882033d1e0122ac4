"""The Work sidebar read at a glance: row order, fading and folding, the status line while
it is hidden, folding on resize, and notifications on small terminals."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.tui import sidebar
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.status import StatusLine
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-sidebar"
ONE_LAUNCH = "[subagents]\nlaunch_concurrency = 1\n"
STALL = Reply(fault=Fault.stall(seconds=60))
# The parent's own requests spend nothing: how many it makes depends on timing.
NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0}

# name: (type, title, reply); the first three finish in turn one, the others start in turn two.
CHILDREN = {
    "ok-job": (
        "explore",
        "map the API routes",
        Reply(text=REPORT, usage={"prompt_tokens": 1500, "completion_tokens": 40}),
    ),
    "bad-job": ("review", "read the config", Reply(fault=Fault.status(400, message="bad request"))),
    "slow-job": ("general", "profile the build", STALL),
    "run-job": ("verifier", "run the test suite", STALL),
    "wait-job": ("implementer", "apply the fix", STALL),
    "stop-job": ("plan", "update the docs", STALL),
}
# Pinned elapsed times, so the pictures do not depend on how fast the machine is.
ELAPSED_MS = {
    "ok-job": 12_000,
    "bad-job": 3_000,
    "slow-job": 30_000,
    "run-job": 65_000,
    "wait-job": 0,
    "stop-job": 0,
}


def by_task(word: str):
    return lambda body: any(f"Task:\n{word}" in str(m.get("content")) for m in body["messages"])


def opens(*names: str) -> Reply:
    return Reply(
        usage=NO_USAGE,
        tool_calls=[
            ToolCallSpec(
                "agent_open",
                {
                    "prompt": name,
                    "name": name,
                    "type": CHILDREN[name][0],
                    "description": CHILDREN[name][1],
                },
            )
            for name in names
        ],
    )


def rows(app) -> list[AgentRow]:
    return list(app.sidebar.agent_rows.children)


def names(app) -> list[str]:
    return [row.snapshot.name for row in rows(app)]


def status_of(app, name: str) -> str:
    return next((r.snapshot.status for r in rows(app) if r.snapshot.name == name), "")


def status_text(app) -> str:
    return str(app.query_one(StatusLine).render())


def write_config(root: Path, text: str) -> None:
    path = root / ".codewhale" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def move_clock(monkeypatch, seconds: float) -> None:
    """The sidebar's clock, `seconds` ahead of the real one (finished rows age at once)."""
    monkeypatch.setattr(sidebar, "wall_clock", lambda: time.time() + seconds)


async def turn_one(app, pilot, llm) -> None:
    """Completed, failed and interrupted (one launch slot: they start in the order opened)."""
    for name, (_, _, reply) in CHILDREN.items():
        llm.route(by_task(name), reply)
    llm.enqueue(opens("ok-job", "bad-job", "slow-job"))
    llm.respond = lambda body: Reply(text="noted", usage=NO_USAGE)
    # An API timeout this short interrupts the stalled child and keeps its checkpoint.
    app.runtime.manager.builder.api_timeout = 1.0
    await type_and_send(pilot, "first")
    await wait_for(pilot, lambda: len(rows(app)) == 3 and not app.turn_running, timeout=20)
    app.runtime.manager.builder.api_timeout = 120


async def turn_two(app, pilot, llm) -> None:
    """Running, queued behind it, and cancelled while queued; then Esc ends the parent's turn."""
    llm.enqueue(opens("run-job", "wait-job", "stop-job"))
    await type_and_send(pilot, "second")
    await wait_for(pilot, lambda: len(rows(app)) == 6 and status_of(app, "run-job") == "running")
    await type_and_send(pilot, "/agent cancel stop-job")
    await wait_for(pilot, lambda: status_of(app, "stop-job") == "cancelled")
    await pilot.press("escape")  # the parent stops waiting; its children keep going
    await wait_for(pilot, lambda: not app.turn_running)


async def six_children(app, pilot, llm) -> None:
    await turn_one(app, pilot, llm)
    await turn_two(app, pilot, llm)


async def freeze(app, pilot, monkeypatch, ahead: float = 0.0) -> None:
    """Stop the clock (`ahead` seconds on), pin every row's elapsed time, clear the
    transcript (how often the parent answered depends on timing) and wait out the last
    notification."""
    await type_and_send(pilot, "/clear")
    now = time.time() + ahead
    monkeypatch.setattr(sidebar, "wall_clock", lambda: now)
    # How long a running child has been quiet depends on the machine's speed: not shown
    # (tests/tui/test_what_is_happening.py pictures it).
    app.sidebar.lookups.quiet_after_secs = float("inf")
    for row in rows(app):
        snapshot = app.runtime.manager.snapshot_of(row.agent_id)
        app.sidebar.show_agent(replace(snapshot, elapsed_ms=ELAPSED_MS[snapshot.name]))
    app.clear_notifications()
    app.composer.focus()
    app.composer.cursor_blink = False
    await wait_for(pilot, lambda: not app.query_one(StatusLine).flashing)
    await pilot.pause(0.2)


async def leave(app, pilot) -> None:
    """Quit, answering the question asked while children still run."""
    await app.action_quit()
    await pilot.pause()
    if app.is_running:
        await app.action_quit()


@pytest.fixture
def fixed_app(llm, monkeypatch):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    (FIXED / "notes.txt").write_text("hello\n")
    write_config(FIXED, ONE_LAUNCH)
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)

    def make() -> CodeWhaleApp:
        app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)
        app.NOTIFICATION_TIMEOUT = 0.5  # the children's notifications are gone before the picture
        return app

    return make


# -- pictures ---------------------------------------------------------------------------


def test_snapshot_six_children_at_120x40(snap_compare, llm, fixed_app, monkeypatch, fixed_usage):
    app = fixed_app()

    async def run_before(pilot):
        await six_children(app, pilot, llm)
        # A minute on: the finished rows have faded, all but the continuable one.
        await freeze(app, pilot, monkeypatch, ahead=sidebar.FADE_AFTER_SECS + 30)
        faded = [row.snapshot.name for row in rows(app) if row.has_class("faded")]
        assert faded == ["stop-job", "bad-job", "ok-job"]

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_snapshot_six_children_at_80x24_with_the_sidebar_shown(
    snap_compare, llm, fixed_app, monkeypatch, fixed_usage
):
    app = fixed_app()

    async def run_before(pilot):
        await six_children(app, pilot, llm)
        assert not app.sidebar.display
        await pilot.press("ctrl+b")
        await freeze(app, pilot, monkeypatch)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


# -- behaviour --------------------------------------------------------------------------


async def test_six_children_are_ordered_and_moved_not_rebuilt(llm, fixed_app):
    app = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await turn_one(app, pilot, llm)
        assert [row.snapshot.status for row in rows(app)] == ["interrupted", "failed", "completed"]
        finished = rows(app)
        await turn_two(app, pilot, llm)
        assert names(app) == ["run-job", "wait-job", "stop-job", "slow-job", "bad-job", "ok-job"]
        assert rows(app)[3:] == finished  # the same widgets, moved down
        assert "Sub-agents: 6 (1 running)" in str(app.sidebar.agents_title.render())
        shown = [str(row.render()) for row in rows(app)]
        assert shown[0].startswith("● Willy run the test suite")
        assert shown[1].startswith("◌ Migaloo apply the fix") and "queued" in shown[1]
        assert "continuable: Enter, then Continue" in shown[3]
        assert shown[5].startswith("✓ Moby map the API routes") and "1.5k" in shown[5]
        await leave(app, pilot)


async def test_finished_rows_fade_then_fold_into_one_done_line(
    llm, make_app, workspace, monkeypatch
):
    write_config(workspace, ONE_LAUNCH)  # one at a time: they finish in the order opened
    jobs = [f"job-{i}" for i in range(7)]
    llm.route(is_child, respond=lambda body: Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": j, "name": j}) for j in jobs])
    )
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "seven")
        await wait_for(pilot, lambda: len(rows(app)) == 7 and not app.turn_running, timeout=30)
        done = app.sidebar.done_line

        def visible() -> list[str]:
            return [r.snapshot.name for r in rows(app) if not r.has_class("folded")]

        assert names(app) == jobs[::-1]  # most recently finished first
        assert visible() == ["job-6", "job-5", "job-4", "job-3", "job-2"]
        assert done.display and str(done.render()).startswith("▸ 2 done")
        assert not any(row.has_class("faded") for row in rows(app))

        move_clock(monkeypatch, sidebar.FADE_AFTER_SECS + 1)
        await wait_for(pilot, lambda: all(row.has_class("faded") for row in rows(app)))
        assert len(visible()) == 5

        move_clock(monkeypatch, sidebar.COLLAPSE_AFTER_SECS + 1)
        await wait_for(pilot, lambda: not visible())
        assert str(done.render()).startswith("▸ 7 done")

        done.focus()
        await pilot.press("enter")
        assert visible() == jobs[::-1]
        assert str(done.render()).startswith("▾ 7 done")
        await pilot.click("#done-line")
        assert not visible()
        await leave(app, pilot)


async def test_the_status_line_counts_children_while_the_sidebar_is_hidden(
    llm, make_app, workspace, monkeypatch
):
    write_config(workspace, ONE_LAUNCH)
    llm.route(is_child, respond=lambda body: STALL)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": p}) for p in ("one", "two")])
    )
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        await type_and_send(pilot, "two children")
        await wait_for(pilot, lambda: "1 agent running · 1 waiting" in status_text(app))
        assert not app.sidebar.display
        await pilot.press("ctrl+b")
        assert app.sidebar.display and "agent running" not in status_text(app)

        # The running row's time ticks; the queued one has none yet.
        running, queued = rows(app)
        move_clock(monkeypatch, 65)
        await wait_for(pilot, lambda: "1m0" in str(running.render()).splitlines()[0])
        assert str(queued.render()).splitlines()[0].rstrip().endswith("two")

        await pilot.press("ctrl+b")
        assert "1 agent running · 1 waiting" in status_text(app)
        await leave(app, pilot)


async def test_the_sidebar_folds_on_the_resize_that_narrows_the_terminal(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.sidebar.display
        await pilot.resize_terminal(90, 30)
        assert not app.sidebar.display and app.has_class("narrow")
        await pilot.resize_terminal(130, 40)
        assert app.sidebar.display and not app.has_class("narrow")
        await pilot.resize_terminal(99, 40)
        assert not app.sidebar.display
        await app.action_quit()


async def test_small_terminals_show_notifications_in_the_status_line(llm, make_app, workspace):
    llm.route(is_child, Reply(text=REPORT))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "quick"})]))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        line = app.query_one(StatusLine)
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: line.flashing == "sub-agent: Moby completed")
        assert "sub-agent: Moby completed" in status_text(app)
        assert not app.screen.query("Toast")

        app.notify("disk [b]full[/b]", severity="error", timeout=0.3)
        await wait_for(pilot, lambda: line.flashing == "disk full")
        assert "bold red" in {str(span.style) for span in line.content.spans}
        await wait_for(pilot, lambda: not line.flashing)
        assert "disk full" not in status_text(app)

        await pilot.resize_terminal(120, 40)
        app.notify("roomy now")
        await wait_for(pilot, lambda: bool(app.screen.query("Toast")))
        assert not line.flashing
        await app.action_quit()
