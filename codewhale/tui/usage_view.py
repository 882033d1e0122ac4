"""The text of /status and /cost: what the session is, and what it has spent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewhale.providers.pricing import format_cost

if TYPE_CHECKING:
    from codewhale.providers.types import Usage
    from codewhale.runtime import Runtime
    from codewhale.tui.app import CodeWhaleApp


def cost_text(value: float | None) -> str:
    """A cost, or "cost unknown" where no price is known (never a guess)."""
    return format_cost(value) or "cost unknown"


def tokens_text(usage: Usage) -> str:
    return f"{usage.input_tokens:,} in · {usage.output_tokens:,} out"


def status_text(runtime: Runtime) -> str:
    """/status: the session, its settings, its context and spending, its children."""
    used, window = runtime.context_use()
    share = f" ({used * 100 // window}%)" if window else ""
    agents = runtime.agents()
    finished = sum(1 for agent in agents if agent.terminal)
    lines = [
        f"session    {runtime.info.id}",
        f"workspace  {runtime.workspace}",
        f"model      {runtime.model} ({runtime.settings.provider})",
        f"mode       {runtime.mode.value}",
        f"context    {used:,} of {window:,} tokens{share}",
        f"tokens     {tokens_text(runtime.usage)}",
        f"cost       {cost_text(runtime.cost_usd)}",
        f"sub-agents {len(agents) - finished} running, {finished} finished",
    ]
    return "\n".join(lines)


def cost_breakdown(runtime: Runtime) -> str:
    """/cost: the session's tokens and cost, then each sub-agent's, nested as delegated."""
    usage = runtime.usage
    lines = [
        f"Session: {tokens_text(usage)} (cache hits {usage.cache_hit_tokens:,}) · "
        f"{cost_text(runtime.cost_usd)}",
        "  (everything: the conversation, its sub-agents and RLM calls)",
    ]
    spending = runtime.agent_spending()
    if not spending:
        lines.append("No sub-agents in this session.")
        return "\n".join(lines)
    lines.append("Sub-agents (each with its own sub-agents):")
    for agent in spending:
        indent = "  " * (agent.depth + 1)
        lines.append(
            f"{indent}{agent.nickname} ({agent.type}, {agent.status}) {agent.agent_id}: "
            f"{tokens_text(agent.usage)} · {cost_text(agent.cost_usd)}"
        )
    return "\n".join(lines)


async def show_status(app: CodeWhaleApp, arguments: str) -> None:
    """/status: the session as it is now."""
    assert app.runtime is not None  # the command needs a session
    await app.transcript.notice(status_text(app.runtime))


async def show_cost(app: CodeWhaleApp, arguments: str) -> None:
    """/cost: what the session and each sub-agent spent."""
    assert app.runtime is not None  # the command needs a session
    await app.transcript.notice(cost_breakdown(app.runtime))
