"""Long sessions open with a screenful of cells and load the rest on scrolling up; cells
are pruned in batches; status line and sidebar redraws coalesce over bursts of events."""

from __future__ import annotations

import json
import re
from pathlib import Path

from codewhale.config import load_config
from codewhale.engine.conversation import UsageMeter
from codewhale.paths import user_dirs
from codewhale.providers.types import Usage
from codewhale.runtime import events
from codewhale.sessions.store import SessionStore
from codewhale.subagents.events import AgentProgress
from codewhale.tui.app import CodeWhaleApp, EngineEvent
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import (
    MAX_MOUNTED,
    PRUNE_BATCH,
    AgentCell,
    AssistantMessage,
    ToolCell,
    UserMessage,
)
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.tui.conftest import is_child, type_and_send, wait_for

MESSAGES = 5_000
SIZE = (120, 40)
LAST_ANSWER = "That is **the end** of the session."


def turn(n: int) -> list[dict]:
    """A prompt, a read, an edit and a sub-agent opened, then a Markdown answer."""
    calls = [
        ("r", "read_file", {"path": "calc.py"}),
        ("e", "edit_file", {"path": "calc.py", "old_string": "x", "new_string": "y"}),
        ("a", "agent_open", {"prompt": f"check step {n}", "description": f"check {n}"}),
    ]
    opened = {"agent_id": f"agent_{n}", "nickname": "Moby", "type": "explore"}
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x\n+y\n"
    return [
        {"role": "user", "content": f"step {n}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"{key}{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for key, name, arguments in calls
            ],
        },
        {"role": "tool", "tool_call_id": f"r{n}", "content": "x = 1\n"},
        {"role": "tool", "tool_call_id": f"e{n}", "content": f"Edited calc.py.\n{diff}"},
        {"role": "tool", "tool_call_id": f"a{n}", "content": json.dumps(opened)},
        {"role": "assistant", "content": f"## Step {n}\n\n- fixed `calc.py`\n- tests pass"},
    ]


def write_session(workspace: Path, count: int = MESSAGES) -> None:
    """A saved session of `count` messages (after the system prompt), with usage totals."""
    _, writer = SessionStore(user_dirs().data_dir).create(workspace.resolve(), "m")
    messages = [{"role": "system", "content": "You are CodeWhale."}]
    n = 0
    while len(messages) <= count:
        messages += turn(n)
        n += 1
    messages = messages[: count + 1]
    messages[-1] = {"role": "assistant", "content": LAST_ANSWER}
    writer.record_messages(messages)
    meter = UsageMeter()
    meter.add_own(Usage(input_tokens=5_000_000, output_tokens=70_000), cost=1.5)
    writer.record_meter(meter.to_json())
    writer.close()


def resumed(workspace: Path) -> CodeWhaleApp:
    return CodeWhaleApp(load_config(workspace=workspace), workspace, continue_latest=True)


def last_answer_shown(app: CodeWhaleApp) -> bool:
    answers = app.transcript.query(AssistantMessage)
    # Mounted with its Markdown blocks, so it has its height.
    return bool(answers) and answers.last().answer == LAST_ANSWER and bool(answers.last().children)


def steps(app: CodeWhaleApp) -> list[int]:
    """The step numbers of the prompts on show, top to bottom."""
    shown = (
        str(cell.render()) for cell in app.transcript.children if isinstance(cell, UserMessage)
    )
    return [int(match.group(1)) for text in shown if (match := re.search(r"step (\d+)", text))]


async def settle(app: CodeWhaleApp, pilot) -> None:
    await wait_for(pilot, lambda: last_answer_shown(app))
    await pilot.pause(0.1)


async def scroll_to_the_top(app: CodeWhaleApp, pilot) -> None:
    """Scroll up until the batch before is mounted and the view is put back in place."""
    transcript = app.transcript
    count = len(transcript.children)
    transcript.scroll_home(animate=False)
    await wait_for(pilot, lambda: len(transcript.children) > count and transcript.scroll_y > 0)


async def test_a_5000_message_session_opens_on_a_screenful_that_ends_with_its_end(
    make_app, workspace
):
    write_session(workspace)
    app = resumed(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        transcript = app.transcript
        # A screenful: each cell takes a row at least, so no more than the screen has rows
        # (with the few the estimate misses), whatever the session's length.
        assert len(transcript.children) <= SIZE[1] + 10
        assert transcript.children[-1] is transcript.query(AssistantMessage).last()
        # The end is what the screen shows: the bottom row of the transcript is the answer.
        region = transcript.content_region
        bottom = app.screen.get_widget_at(region.x + 1, region.bottom - 1)[0]
        assert transcript.children[-1] in (bottom, *bottom.ancestors)
        # The cells a live turn makes, counters included.
        titles = [str(cell.title) for cell in transcript.query(ToolCell)]
        assert "✓ edit_file calc.py" in titles and not any("agent_open" in t for t in titles)
        assert transcript.query(AgentCell) and transcript.query("DiffView")
        assert "↑5000.0k ↓70.0k" in str(app.query_one(StatusLine).render())
        assert steps(app)[-1] == (MESSAGES - 1) // 6
        await app.action_quit()


async def test_scrolling_to_the_top_mounts_the_batch_before_without_moving_the_view(
    make_app, workspace
):
    write_session(workspace)
    app = resumed(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        transcript = app.transcript
        shown = steps(app)
        top = transcript.children[0]
        await scroll_to_the_top(app, pilot)
        # The previous prompts, right before the ones shown, above them.
        older = steps(app)
        assert older[-len(shown) :] == shown
        assert older[: -len(shown)] == list(range(shown[0] - len(older) + len(shown), shown[0]))
        assert transcript.children.index(top) > 0
        # The cell that was at the top of the view still is.
        assert top.virtual_region.y == round(transcript.scroll_y)
        await app.action_quit()


async def test_cells_past_the_limit_are_pruned_in_batches(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        transcript = app.transcript
        removals: list[int] = []
        remove_children = transcript.remove_children

        def counted(selector="*"):
            removals.append(len(selector) if isinstance(selector, list) else -1)
            return remove_children(selector)

        transcript.remove_children = counted
        for n in range(MAX_MOUNTED + 3 * PRUNE_BATCH):
            await transcript.notice(f"notice {n}")
            assert len(transcript.children) <= MAX_MOUNTED + PRUNE_BATCH
        # One remove per PRUNE_BATCH cells added, each taking a batch, never one at a time.
        assert removals == [PRUNE_BATCH + 1] * 2
        assert (
            str(transcript.children[-1].render()) == f"notice {MAX_MOUNTED + 3 * PRUNE_BATCH - 1}"
        )
        await app.action_quit()


async def test_pruned_history_comes_back_on_scrolling_up(make_app, workspace):
    write_session(workspace, 600)
    app = resumed(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        transcript = app.transcript
        while len(transcript.children) < MAX_MOUNTED:  # the user reads far back
            await scroll_to_the_top(app, pilot)
        transcript.scroll_end(animate=False)
        await pilot.pause()
        for n in range(PRUNE_BATCH + 5):
            await transcript.notice(f"notice {n}")
        assert len(transcript.children) <= MAX_MOUNTED + PRUNE_BATCH
        first_shown = steps(app)[0]
        assert first_shown > 0
        # Scrolling up rebuilds what was pruned: every step once, in order, no gap.
        while steps(app)[0] > 0:
            await scroll_to_the_top(app, pilot)
        assert steps(app) == list(range(len(steps(app))))
        await app.action_quit()


async def test_a_burst_of_events_redraws_the_status_line_and_rows_a_few_times(
    llm, make_app, workspace, monkeypatch
):
    drawn = {"status": 0, "rows": 0}
    show, paint = StatusLine.show, AgentRow.paint

    def counted_show(self, **fields):
        drawn["status"] += 1
        show(self, **fields)

    def counted_paint(self, now):
        drawn["rows"] += 1
        paint(self, now)

    monkeypatch.setattr(StatusLine, "show", counted_show)
    monkeypatch.setattr(AgentRow, "paint", counted_paint)
    llm.route(is_child, Reply(fault=Fault.stall(seconds=30)))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "wait"})]))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(
            pilot,
            lambda: (
                bool(app.query(AgentRow)) and app.query_one(AgentRow).snapshot.status == "running"
            ),
        )
        await pilot.pause(0.2)
        agent_id = app.query_one(AgentRow).agent_id
        drawn.update(status=0, rows=0)
        for seq in range(100):
            app.post_message(
                EngineEvent(events.UsageEvent(input=1, output=1, cache_hit=0, cache_miss=1))
            )
            progress = AgentProgress(
                seq=10_000 + seq, agent_id=agent_id, message="writing", text_tail=f"line {seq}"
            )
            app.post_message(EngineEvent(progress))
        await wait_for(pilot, lambda: "│ line 99" in str(app.query_one(AgentCell).render()))
        await pilot.pause(0.2)
        # 200 events, each asking for a redraw: the line and the row draw a few times (one
        # per 1/30 s the burst lasts, so more on a busy machine), never once per event.
        assert 1 <= drawn["status"] <= 40
        assert 1 <= drawn["rows"] <= 40
        await app.action_quit()
