"""SubagentStart and SubagentStop hooks for one child run (docs/HOOKS.md); the matcher
is tested against the child's type (`explore`, `worker`, a definition's name)."""

from __future__ import annotations

from codewhale.engine.loop import Engine, TurnResult
from codewhale.engine.turn_hooks import keep_going
from codewhale.hooks.names import HookEvent
from codewhale.hooks.session import Hooks
from codewhale.subagents.records import WorkerRecord


async def agent_started(hooks: Hooks, record: WorkerRecord) -> list[str]:
    """SubagentStart: the context its hooks add to the child's first message."""
    if not hooks.has(HookEvent.SUBAGENT_START):
        return []
    verdict = await hooks.run(HookEvent.SUBAGENT_START, record.type, _identity(record))
    return list(verdict.context)


async def agent_stopping(engine: Engine, record: WorkerRecord, result: TurnResult) -> TurnResult:
    """SubagentStop: a hook that blocks sends the child back to work with its reason."""
    return await keep_going(
        engine.context.hooks,
        result,
        engine.run_turn,
        event=HookEvent.SUBAGENT_STOP,
        value=record.type,
        payload=_identity(record),
    )


def _identity(record: WorkerRecord) -> dict[str, str]:
    return {"agent_id": record.agent_id, "agent_type": record.type}
