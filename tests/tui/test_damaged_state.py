"""The app opens on a damaged sub-agent state file: one warning, and children still run."""

from __future__ import annotations

import pytest

from codewhale.subagents.store import SubagentStore
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import Notice
from tests.support.damaged_state import GOOD, KINDS, damage, set_aside
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for


@pytest.mark.parametrize("kind", ["null record", "binary byte", "huge garbage journal line"])
async def test_the_sidebar_works_beside_a_damaged_state_file(llm, make_app, workspace, kind):
    assert kind in KINDS
    damaged = damage(workspace, kind)
    llm.route(is_child, Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "survey"})]),
        Reply(text="waiting for the survey"),
        Reply(text="the survey is done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await wait_for(pilot, lambda: bool(app.query(".notice.warning")))
        notices = [str(notice.render()) for notice in app.query(Notice)]
        (warning,) = [text for text in notices if "sub-agent state" in text]
        assert str(damaged) in warning and ".damaged-" in warning
        await type_and_send(pilot, "go")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        await wait_for(pilot, lambda: str(app.query_one(AgentRow).render()).startswith("✓"))
        await app.action_quit()
    assert len(set_aside(damaged)) == 1
    statuses = {r.agent_id: r.status for r in SubagentStore(workspace).load()}
    assert statuses[GOOD] == "completed" and len(statuses) == 2
