"""The agent screen's "Continue with a message": a finished child's follow-up starts a new
run on its own context, which the screen follows, and the Work sidebar counts its runs."""

from __future__ import annotations

from textual.widgets import Input

from codewhale.runtime.events import AgentSnapshot
from codewhale.subagents.budget import Budget
from codewhale.tui.agent_screen import header_text
from codewhale.tui.sidebar import AgentRow, row_text, row_tooltip
from codewhale.tui.transcript import AssistantMessage, UserMessage
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import is_child, open_agent_screen, type_and_send, wait_for

FIRST = (
    "SUMMARY: notes read\nCHANGES: None.\nEVIDENCE:\n- notes.txt:1\nRISKS: none\nBLOCKERS: None."
)
SECOND = (
    "SUMMARY: words counted\nCHANGES: None.\nEVIDENCE:\n- notes.txt:1\nRISKS: none\nBLOCKERS: None."
)
FOLLOW_UP = "now count the words"


def enabled(screen) -> set[str]:
    return {str(w.id) for w in screen.query("Input, Button") if not w.disabled}


def header(screen) -> str:
    return str(screen.query_one("#agent-header").render())


async def test_continue_with_a_message_revives_a_completed_child(llm, make_app, workspace):
    llm.route(is_child, Reply(text=FIRST), Reply(text=SECOND))
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "read the notes", "description": "reader"})
            ]
        ),
        Reply(text="waiting for the reader"),
    )
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        screen = await open_agent_screen(pilot, app)
        await wait_for(pilot, lambda: "completed" in header(screen))
        box = screen.query_one("#agent-message", Input)
        # Finished, the box stays shut until the user asks for a new run.
        assert box.disabled and enabled(screen) == {"revive", "back"}
        await pilot.click("#revive")
        assert not box.disabled and screen.focused is box
        assert "new run" in box.placeholder
        box.value = FOLLOW_UP
        await pilot.press("enter")

        # The screen follows the new run to its end: the follow-up, then the new report.
        await wait_for(pilot, lambda: "completed" in header(screen) and "run 2" in header(screen))
        await wait_for(
            pilot,
            lambda: any("words counted" in m.source for m in screen.query(AssistantMessage)),
        )
        assert [str(m.render()) for m in screen.query(UserMessage)][-1].endswith(FOLLOW_UP)
        assert box.value == "" and enabled(screen) == {"revive", "back"}
        # Its own context: the first assignment and report, then the follow-up.
        child = [r.json for r in llm.requests if is_child(r.json)]
        said = [str(m.get("content")) for m in child[-1]["messages"]]
        assert len(child) == 2 and any("read the notes" in text for text in said)
        assert any(FIRST in text for text in said) and FOLLOW_UP in said[-1]

        await pilot.press("escape")
        row = app.query_one(AgentRow)
        await wait_for(pilot, lambda: "run 2" in str(row.render()).splitlines()[0])
        assert "run 2" in str(row.tooltip)
        await app.action_quit()


def snapshot(**fields) -> AgentSnapshot:
    base = dict(
        agent_id="agent_0000beef",
        name="reader",
        nickname="Moby",
        description="read the notes",
        type="explore",
        role="explore",
        status="completed",
        worker_status="completed",
        activity="",
        steps_taken=2,
        elapsed_ms=12_000,
        tokens=3_100,
        terminal=True,
        model="deepseek-chat",
    )
    return AgentSnapshot(**{**base, **fields})


def test_the_row_shows_the_run_count_and_budget_only_when_there_is_one():
    plain = row_text(snapshot(), 12_000, 40).plain.splitlines()
    assert plain[0].endswith(" 12s") and "run" not in plain[0]
    assert "deepseek-chat" in plain[1] and "budget" not in plain[1]

    budget = Budget(max_runtime_secs=120, max_tokens=50_000, max_cost_usd=0.2)
    revived = snapshot(runs=2, budget=budget, budget_tokens=45_000)
    first, second = row_text(revived, 12_000, 60, cost=0.01).plain.splitlines()
    # Each figure a budget limits is shown beside its limit.
    assert first.endswith(" run 2 · 12s/2m00s")
    assert second.endswith(" 2 steps 0 tools 45.0k/50.0k $0.01/$0.20")
    tooltip = str(row_tooltip(revived, 12_000, 0.01))
    assert "completed · run 2" in tooltip
    assert "budget 12s/2m00s · 45.0k/50.0k tok · $0.01/$0.20" in tooltip


def test_the_agent_screen_header_says_the_run_and_the_budget():
    assert "run" not in header_text("agent_0000beef", snapshot())
    assert "budget" not in header_text("agent_0000beef", snapshot())
    text = header_text(
        "agent_0000beef", snapshot(runs=3, budget=Budget(max_runtime_secs=60)), cost=None
    )
    assert text == "Moby · explore · completed · run 3 · 2 steps · 3100 tokens · budget 12s/1m00s"
