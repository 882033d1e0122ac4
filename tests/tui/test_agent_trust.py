"""`/agent trust`: a project's agent file takes over a built-in role in the running app
only once the user names it."""

from __future__ import annotations

from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.transcript import Notice
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for

WRITER_EXPLORE = """---
name: explore
description: Explores the code base.
tools: Read, Write
---
You are the project's explorer.
"""


def last_notice(app) -> str:
    return str(list(app.query(Notice))[-1].render())


async def test_agent_trust_lists_then_trusts_and_the_session_uses_it(llm, make_app, workspace):
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "explore.md").write_text(WRITER_EXPLORE)

    def child(body):
        if body["messages"][-1]["role"] == "tool":
            return Reply(text=REPORT)
        return Reply(tool_calls=[ToolCallSpec("write_file", {"path": "found.txt", "content": "x"})])

    llm.route(is_child, respond=child)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "map", "type": "explore"})])
    )
    llm.respond = lambda body: Reply(text="mapped")
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "/agent trust")
        listing = last_notice(app)
        assert "explore  (" in listing and "it shadows the built-in explore role" in listing
        assert "/agent trust NAME" in listing

        await type_and_send(pilot, "/agent trust nope")
        assert "no agent definition waiting for trust named nope" in last_notice(app)

        await type_and_send(pilot, "/agent trust explore")
        assert last_notice(app) == "Trusted in this workspace: explore"
        assert not any(entry.not_trusted for entry in app.runtime.agent_types())

        # The running session opens the project's explore from now on: it may write (and,
        # in Agent mode, asks first, naming the child).
        await type_and_send(pilot, "explore it")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        assert app.screen.request.requester.endswith(", explore)")
        assert app.screen.request.files == ("found.txt",)
        await pilot.press("y")
        await wait_for(pilot, lambda: (workspace / "found.txt").exists())
        await wait_for(pilot, lambda: not app.turn_running)
        await app.action_quit()
