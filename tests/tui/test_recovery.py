"""After a quit mid-run, `--continue` lists the interrupted child and continues it."""

from __future__ import annotations

from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.sidebar import AgentRow
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for


async def test_continue_lists_the_interrupted_child_and_its_continue_action_runs_it(
    llm, make_app, workspace
):
    llm.route(is_child, Reply(fault=Fault.stall(seconds=30)), Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "long survey"})]),
        Reply(text="waiting for the survey"),
    )
    first = make_app(workspace)
    async with first.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "go")
        await wait_for(pilot, lambda: any(is_child(r.json) for r in llm.requests))
        await first.action_quit()

    again = CodeWhaleApp(load_config(workspace=workspace), workspace, continue_latest=True)
    async with again.run_test(size=(140, 36)) as pilot:
        await wait_for(pilot, lambda: bool(again.query(AgentRow)))
        row = again.query_one(AgentRow)
        shown = str(row.render())
        assert shown.startswith("⏸") and "Continue" in shown
        await pilot.click(f"#{row.id}")
        await wait_for(pilot, lambda: again.screen.__class__.__name__ == "AgentScreen")
        assert again.screen.query_one("#continue").display
        await pilot.click("#continue")
        await wait_for(
            pilot, lambda: "completed" in str(again.screen.query_one("#agent-header").render())
        )
        await pilot.press("escape")
        await wait_for(pilot, lambda: str(again.query_one(AgentRow).render()).startswith("✓"))
        resumed = [r.json["messages"] for r in llm.requests if is_child(r.json)][-1]
        assert "parent session closed" in resumed[-1]["content"]
        await again.action_quit()
