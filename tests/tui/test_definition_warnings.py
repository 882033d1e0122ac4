"""The app opens on a real collection's problems with one notice, not one per file."""

from __future__ import annotations

from codewhale.tui.transcript import Notice
from tests.tui.conftest import wait_for


async def test_agent_definition_problems_are_one_notice(make_app, workspace):
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    for index in range(30):  # no description: each fails to parse
        (agents / f"broken-{index}.md").write_text(f"---\nname: broken-{index}\n---\nbody\n")
    for index in range(5):  # an unknown colour: loaded, with a warning
        (agents / f"helper-{index}.md").write_text(
            f"---\nname: helper-{index}\ndescription: d\ncolor: plaid\n---\nbody\n"
        )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None and bool(app.query(Notice)))
        notices = [str(notice.render()) for notice in app.query(Notice)]
        about_agents = [text for text in notices if "agent definition" in text]
        assert about_agents == [
            "5 agent definitions have warnings and 30 failed to load: see `codewhale agents types`"
        ]
        await app.action_quit()
