"""/agent show's card, /status, /cost per child, /model validation and /relay in Plan mode."""

from __future__ import annotations

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import AssistantMessage, Notice
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import REPORT, type_and_send, wait_for


def by_task(word):
    return lambda body: any(f"Task:\n{word}" in str(m.get("content")) for m in body["messages"])


def usage(prompt: int, completion: int, cost: float | None = None) -> dict:
    counted = {"prompt_tokens": prompt, "completion_tokens": completion}
    return counted | ({"cost": cost} if cost is not None else {})


def notices(app) -> list[str]:
    return [str(notice.render()) for notice in app.query(Notice)]


async def command(pilot, app, text: str) -> str:
    """Send a slash command and return the notice it added."""
    before = len(app.query(Notice))
    await type_and_send(pilot, text)
    await wait_for(pilot, lambda: len(app.query(Notice)) > before)
    return notices(app)[-1]


async def test_agent_show_renders_the_record_as_a_card(llm, make_app, workspace):
    llm.route(by_task("survey"), Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "survey", "name": "surveyor"})])
    )
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        await wait_for(pilot, lambda: not app.turn_running, timeout=20)
        (agent,) = app.runtime.agents()
        card = await command(pilot, app, "/agent show surveyor")
        heading = card.splitlines()[0]
        assert heading.startswith(f"{agent.agent_id} ({agent.nickname}, ")
        assert heading.endswith("— completed")
        assert "  objective: survey" in card and "  tokens: " in card
        assert "  transcript: " in card and "SUMMARY: done" in card
        assert '"agent_id"' not in card  # a card, not the JSON record
        missing = await command(pilot, app, "/agent show nobody")
        assert "nobody not found" in missing
        await app.action_quit()


async def test_status_names_the_session_its_settings_and_spending(llm, make_app, workspace):
    llm.enqueue(Reply(text="hello", usage=usage(1_200, 34)))
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "hi")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        runtime = app.runtime
        status = await command(pilot, app, "/status")
        used, window = runtime.context_use()
        assert f"session    {runtime.info.id}" in status
        assert f"workspace  {workspace}" in status
        assert f"model      {runtime.model} (deepseek)" in status
        assert "mode       agent" in status
        assert f"context    {used:,} of {window:,} tokens" in status
        assert "tokens     1,200 in · 34 out" in status
        assert "cost       $" in status
        assert "sub-agents 0 running, 0 finished" in status
        await app.action_quit()


async def test_cost_breaks_the_session_down_per_child(llm, make_app, workspace):
    # Every response says what it cost (OpenRouter's usage.cost): that figure is the cost.
    llm.route(by_task("alpha"), Reply(text=REPORT, usage=usage(1_000, 100, 0.25)))
    llm.route(by_task("beta"), Reply(text=REPORT, usage=usage(2_000, 200, 0.5)))
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": word, "name": word})
                for word in ("alpha", "beta")
            ],
            usage=usage(300, 30, 0.125),
        )
    )
    llm.respond = lambda body: Reply(text="noted", usage=usage(300, 3, 0.125))
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "two")
        await wait_for(pilot, lambda: len(app.query(AgentRow)) == 2)
        await wait_for(
            pilot,
            lambda: not app.turn_running and all(a.terminal for a in app.runtime.agents()),
            timeout=20,
        )
        parent_requests = len(llm.requests) - 2
        breakdown = await command(pilot, app, "/cost")
        lines = breakdown.splitlines()
        by_name = {a.name: a for a in app.runtime.agents()}
        alpha = next(line for line in lines if by_name["alpha"].agent_id in line)
        beta = next(line for line in lines if by_name["beta"].agent_id in line)
        assert alpha.endswith("1,000 in · 100 out · $0.25")
        assert beta.endswith("2,000 in · 200 out · $0.50")
        total = 0.75 + 0.125 * parent_requests
        assert lines[0].endswith(f"${total:,.2f}")
        assert app.runtime.cost_usd == total
        await app.action_quit()


async def test_model_nonsense_is_refused_naming_the_choices(llm, monkeypatch, workspace):
    # The official DeepSeek endpoint (no request is sent: only the id is checked).
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        before = app.runtime.model
        refused = await command(pilot, app, "/model nonsense")
        assert "Invalid model 'nonsense' for provider DeepSeek" in refused
        assert "deepseek-v4-pro, deepseek-v4-flash" in refused
        assert "provider = custom and base_url" in refused
        assert app.runtime.model == before
        accepted = await command(pilot, app, "/model deepseek-v4-flash")
        assert accepted == "model: deepseek-v4-flash"
        assert app.runtime.model == "deepseek-v4-flash"
        await app.action_quit()


async def test_relay_in_plan_mode_saves_the_models_answer_as_the_handoff(llm, make_app, workspace):
    handoff = "# Session relay\n\n## Goal\nShip the fix.\n\n## Next action\nRun the tests."
    llm.enqueue(Reply(text=f"```markdown\n{handoff}\n```"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("tab")  # Agent → Plan: the model's own writes are refused here
        assert app.runtime.mode is Mode.PLAN
        await type_and_send(pilot, "/relay ship the fix")
        path = workspace / ".codewhale" / "handoff.md"
        await wait_for(pilot, lambda: any("Hand-off saved to" in n for n in notices(app)))
        assert path.read_text() == handoff + "\n"
        assert path.stat().st_mode & 0o777 == 0o600
        prompt = llm.requests[0].json["messages"][-1]["content"]
        assert "do not write it with a tool" in prompt and "ship the fix" in prompt
        # A second relay sees the first, to update it.
        llm.enqueue(Reply(text="# Session relay\n\nUpdated."))
        await type_and_send(pilot, "/relay")
        await wait_for(pilot, lambda: path.read_text() == "# Session relay\n\nUpdated.\n")
        assert "Ship the fix." in llm.requests[1].json["messages"][-1]["content"]
        await app.action_quit()


async def test_relay_whose_turn_fails_writes_nothing_and_says_why(llm, make_app, workspace):
    llm.enqueue(Reply(text=""))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "/relay")
        await wait_for(pilot, lambda: any("hand-off was not written" in n for n in notices(app)))
        assert not (workspace / ".codewhale" / "handoff.md").exists()
        await app.action_quit()
