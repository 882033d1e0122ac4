"""/skills lists the workspace's skills and /<name> runs one, its arguments filled in."""

from __future__ import annotations

from tests.support.llm_server import Reply
from tests.tui.conftest import type_and_send, wait_for
from tests.tui.test_usage_commands import command

DEPLOY = """---
name: deploy
description: Deploy the service to an environment.
argument-hint: "[environment]"
disable-model-invocation: true
---
Deploy to $ARGUMENTS: run the checks, then the deploy script.
"""


async def test_skills_are_listed_and_a_user_skill_runs_as_a_command(llm, make_app, workspace):
    folder = workspace / ".claude" / "skills" / "deploy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(DEPLOY)
    llm.respond = lambda body: Reply(text="deploying")
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        listed = await command(pilot, app, "/skills")
        assert "- deploy: Deploy the service to an environment." in listed
        await type_and_send(pilot, "/deploy staging")
        await wait_for(pilot, lambda: bool(llm.requests) and not app.turn_running, timeout=20)
        sent = llm.requests[-1].json["messages"][-1]["content"]
        assert "Deploy to staging: run the checks" in sent
        # Only the user may run it: the model is not offered a skill tool for it.
        assert "skill" not in {t["function"]["name"] for t in llm.requests[-1].json["tools"]}
        await app.action_quit()
