"""More flows through the real app, and the SVG snapshots of its main screens."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import AssistantMessage, Notice, ToolCell
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-flows"


async def test_a_tool_cell_expands_to_its_output(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]), Reply(text="read")
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "read")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        cell = app.query_one(ToolCell)
        assert cell.collapsed
        await pilot.click(f"#{cell.id}" if cell.id else ToolCell)
        await wait_for(pilot, lambda: not cell.collapsed)
        assert "1\thello" in str(cell.output.render())
        await app.action_quit()


async def test_tab_queues_a_draft_for_after_the_turn(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "sleep 1.5"})]),
        Reply(text="first done"),
        Reply(text="second done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "first")
        await wait_for(pilot, lambda: bool(app.query(ToolCell)))
        for char in "later":
            await pilot.press(char)
        await pilot.press("tab")
        assert app.composer.text == ""
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 3)
        assert llm.requests[2].json["messages"][-1] == {"role": "user", "content": "later"}
        await app.action_quit()


async def test_quitting_mid_answer_records_the_turn_as_interrupted(llm, make_app, workspace):
    llm.enqueue(Reply(text=["partial ", "answer ", "never finished"], chunk_delay=1.0))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "slow one")
        await wait_for(pilot, lambda: bool(app.query(AssistantMessage)))
        path = app.runtime.info.path
        await app.action_quit()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    ends = [r["event"] for r in records if r.get("event", {}).get("type") == "turn_complete"]
    assert [end["status"] for end in ends] == ["interrupted"]


async def test_esc_cancels_the_turn_and_children_survive(llm, make_app, workspace):
    llm.route(is_child, Reply(text=REPORT, request_delay=1.0))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "survive"})]),
        Reply(text="waiting for the child"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        await wait_for(pilot, lambda: bool(app.query(AssistantMessage)))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.turn_running)
        await wait_for(pilot, lambda: str(app.query_one(AgentRow).render()).startswith("✓"))
        assert any("turn cancelled" in str(n.render()) for n in app.query(Notice))
        await app.action_quit()


async def test_plan_mode_refusal_is_shown_and_reaches_the_model(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "x.txt", "content": "x"})]),
        Reply(text="I will describe it instead."),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("tab")  # Agent → Plan
        assert app.runtime.mode is Mode.PLAN
        await type_and_send(pilot, "write x")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        cell = app.query_one(ToolCell)
        assert cell.has_class("failed") and "Plan mode is read-only" in str(cell.output.render())
        assert not (workspace / "x.txt").exists()
        await app.action_quit()


async def test_denying_an_approval_tells_the_model(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "touch denied.txt"})]),
        Reply(text="ok, not running it"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "make a file")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.turn_running)
        assert not (workspace / "denied.txt").exists()
        assert (
            "the user denied this exec_shell call"
            in llm.requests[1].json["messages"][-1]["content"]
        )
        await app.action_quit()


async def test_relay_asks_for_the_handoff_file(llm, make_app, workspace):
    llm.enqueue(Reply(text="written"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "/接力   ship  the fix")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        prompt = llm.requests[0].json["messages"][-1]["content"]
        assert ".codewhale/handoff.md" in prompt and "# Session relay" in prompt
        for section in (
            "Goal",
            "Current work",
            "Files and state",
            "Decisions",
            "Verification",
            "Next action",
        ):
            assert section in prompt
        assert "900 words" in prompt and "ship  the fix" in prompt
        assert f"workspace: {workspace}" in prompt
        await app.action_quit()


async def test_cancelling_a_child_from_its_agent_screen(llm, make_app, workspace):
    llm.route(is_child, Reply(fault=Fault.stall(seconds=20)))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "slow"})]),
        Reply(text="waiting"),
        Reply(text="it was cancelled"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "go")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        row = app.query_one(AgentRow)
        await pilot.click(f"#{row.id}")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "AgentScreen")
        await pilot.click("#cancel")
        await wait_for(
            pilot, lambda: "cancelled" in str(app.screen.query_one("#agent-header").render())
        )
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.turn_running)
        assert str(app.query_one(AgentRow).render()).startswith("⊘")
        await app.action_quit()


async def test_three_children_settle_to_completed_failed_and_cancelled(llm, make_app, workspace):
    def by_task(word):
        return lambda body: any(f"Task:\n{word}" in str(m.get("content")) for m in body["messages"])

    llm.route(by_task("ok-job"), Reply(text=REPORT, request_delay=0.2))
    llm.route(by_task("bad-job"), Reply(fault=Fault.status(400, message="bad")))
    llm.route(by_task("stop-job"), Reply(fault=Fault.stall(seconds=20)))
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": p, "name": p})
                for p in ("ok-job", "bad-job", "stop-job")
            ]
        )
    )
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "three")
        await wait_for(pilot, lambda: len(app.query(AgentRow)) == 3)
        await type_and_send(pilot, "/agent cancel stop-job")
        await wait_for(pilot, lambda: not app.turn_running, timeout=20)
        glyphs = sorted(str(row.render())[0] for row in app.query(AgentRow))
        assert glyphs == sorted(["✓", "✗", "⊘"])
        await app.action_quit()


# -- snapshots ------------------------------------------------------------------------


@pytest.fixture
def fixed_app(llm, monkeypatch):
    FIXED.mkdir(exist_ok=True)
    (FIXED / "notes.txt").write_text("hello\n")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return lambda: CodeWhaleApp(load_config(workspace=FIXED), FIXED)


def test_snapshot_empty_start(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=(110, 24))


def test_snapshot_onboarding(snap_compare, llm, monkeypatch):
    FIXED.mkdir(exist_ok=True)
    home = FIXED / "home"
    (home / "config" / "config.toml").unlink(missing_ok=True)
    # The dialog shows on a machine's first launch only: make this one the first.
    (home / "state" / "onboarding.json").unlink(missing_ok=True)
    monkeypatch.setenv("CODEWHALE_HOME", str(home))  # the dialog shows this path
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no local servers to offer
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "OnboardingScreen")
        await steady_key_field(app, pilot)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


def test_snapshot_offline_onboarding(snap_compare, monkeypatch):
    """No key and nothing configured: the bundled model runs, and the dialog says so."""
    FIXED.mkdir(exist_ok=True)
    home = FIXED / "home"
    (home / "config" / "config.toml").unlink(missing_ok=True)
    # The dialog shows on a machine's first launch only: make this one the first.
    (home / "state" / "onboarding.json").unlink(missing_ok=True)
    monkeypatch.setenv("CODEWHALE_HOME", str(home))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    app = CodeWhaleApp(load_config(workspace=FIXED), FIXED)
    assert app.loaded.offline_fallback, "needs the local extra (`make local`)"

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "OnboardingScreen")
        await steady_key_field(app, pilot)

    assert snap_compare(app, terminal_size=(110, 28), run_before=run_before)


def test_snapshot_finished_turn_with_tool_cells(snap_compare, llm, fixed_app):
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("read_file", {"path": "notes.txt"}, id="c1"),
                ToolCallSpec("list_dir", {}, id="c2"),
            ]
        ),
        Reply(
            text="The file says **hello**.", usage={"prompt_tokens": 900, "completion_tokens": 12}
        ),
    )
    app = fixed_app()

    async def run_before(pilot):
        await type_and_send(pilot, "what is in notes.txt?")
        await wait_for(
            pilot,
            lambda: (
                not app.turn_running
                and app.query(AssistantMessage)
                and "hello" in app.query_one(AssistantMessage).source
            ),
        )
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


def test_snapshot_approval_modal(snap_compare, llm, fixed_app):
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "make test"})]))
    app = fixed_app()

    async def run_before(pilot):
        await type_and_send(pilot, "run the tests")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


async def steady_key_field(app, pilot) -> None:
    app.screen.query_one("#key").cursor_blink = False
    await pilot.pause(0.2)


async def settle(app, pilot) -> None:
    """Same focus, a steady cursor and no durations, so the SVG does not depend on timing."""
    for cell in app.query(ToolCell):
        cell.title = cell.title.rsplit("  ", 1)[0]
    app.composer.focus()
    app.composer.cursor_blink = False
    await pilot.pause(0.2)


def test_snapshot_empty_start_steady(snap_compare, fixed_app):
    app = fixed_app()

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.runtime is not None)
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


def _children_app(llm, fixed_app):
    def by_task(word):
        return lambda body: any(f"Task:\n{word}" in str(m.get("content")) for m in body["messages"])

    llm.route(
        by_task("map the api"),
        # Late enough that the parent has answered and is waiting when it completes.
        Reply(
            text=REPORT, usage={"prompt_tokens": 1500, "completion_tokens": 40}, request_delay=0.3
        ),
    )
    llm.route(by_task("run the tests"), Reply(fault=Fault.stall(seconds=30)))
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "agent_open",
                    {"prompt": "map the api", "type": "explore", "description": "map the API"},
                ),
                ToolCallSpec(
                    "agent_open",
                    {"prompt": "run the tests", "type": "verifier", "description": "run the suite"},
                ),
            ]
        )
    )
    llm.respond = lambda body: Reply(text="Both children are on it.")
    return fixed_app()


async def _freeze_rows(app, pilot):
    """Elapsed seconds tick while a child runs; pin them so the picture is repeatable."""
    from dataclasses import replace

    # How long a running child has been quiet depends on the machine's speed: not shown
    # (tests/tui/test_what_is_happening.py pictures it).
    app.sidebar.lookups.quiet_after_secs = float("inf")
    for row in app.query(AgentRow):
        row.show(replace(app.runtime.manager.snapshot_of(row.agent_id), elapsed_ms=0))
    await settle(app, pilot)


def test_snapshot_work_sidebar_with_running_and_finished_children(
    snap_compare, llm, fixed_app, fixed_usage
):
    app = _children_app(llm, fixed_app)

    async def run_before(pilot):
        await type_and_send(pilot, "delegate")
        await wait_for(
            pilot,
            lambda: (
                len(app.query(AgentRow)) == 2
                and any(str(r.render()).startswith("✓") for r in app.query(AgentRow))
            ),
        )
        await wait_for(
            pilot,
            lambda: any(
                "running" in (app.runtime.manager.snapshot_of(r.agent_id).status)
                for r in app.query(AgentRow)
            ),
        )
        # The parent reads the first completion (after the settle window for siblings).
        await wait_for(
            pilot,
            lambda: (
                [m.get("content") for m in app.runtime.messages].count("Both children are on it.")
                == 2
            ),
        )
        await wait_for(pilot, lambda: bool(app.child_wait.remaining))  # held for Humphrey
        # Whether Moby's end woke the parent or came while its answer streamed depends on
        # timing; the marker that says so has its own test (test_what_is_happening.py).
        for marker in app.query(".wake"):
            await marker.remove()

        await pilot.pause(0.1)
        await _freeze_rows(app, pilot)

    assert snap_compare(app, terminal_size=(130, 30), run_before=run_before)


def test_snapshot_agent_screen(snap_compare, llm, fixed_app):
    app = _children_app(llm, fixed_app)

    async def run_before(pilot):
        await type_and_send(pilot, "delegate")
        await wait_for(
            pilot, lambda: any(str(r.render()).startswith("✓") for r in app.query(AgentRow))
        )
        done = next(r for r in app.query(AgentRow) if str(r.render()).startswith("✓"))
        await pilot.click(f"#{done.id}")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "AgentScreen")
        # Its conversation is shown once the child's report is (not after a fixed pause).
        await wait_for(pilot, lambda: bool(app.screen.query(AssistantMessage)))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(110, 30), run_before=run_before)
