"""The hooks around a turn: SessionStart, UserPromptSubmit, Stop / SubagentStop (which may
keep an agent working) and SessionEnd, with Claude Code's payloads (docs/HOOKS.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codewhale.engine.loop import TurnResult
from codewhale.hooks.names import HookEvent
from codewhale.hooks.session import Hooks

# How often Stop hooks may send one turn back to work. Claude Code leaves the loop to the
# hook (`stop_hook_active`); a hook that forgets to check it must not spend forever.
MAX_STOP_CONTINUATIONS = 5


@dataclass(frozen=True)
class Submitted:
    refusal: str = ""  # why a UserPromptSubmit hook refused the prompt ('' if it did not)
    context: tuple[str, ...] = ()


async def session_start(hooks: Hooks, source: str | None, model: str) -> tuple[str, ...]:
    """SessionStart (`source`: startup, resume, clear, compact; None: not due): the context
    its hooks add to the next prompt."""
    if source is None or not hooks.has(HookEvent.SESSION_START):
        return ()
    verdict = await hooks.run(HookEvent.SESSION_START, source, {"source": source, "model": model})
    return verdict.context


async def prompt_submitted(hooks: Hooks, prompt: str) -> Submitted:
    if not hooks.has(HookEvent.USER_PROMPT_SUBMIT):
        return Submitted()
    verdict = await hooks.run(HookEvent.USER_PROMPT_SUBMIT, None, {"prompt": prompt})
    if verdict.blocked or verdict.stop:
        said = verdict.reason or verdict.stop_reason or "no reason given"
        return Submitted(refusal=f"a UserPromptSubmit hook refused the prompt: {said}")
    return Submitted(context=verdict.context)


def with_context(prompt: str, context: list[str]) -> str:
    """The prompt with what hooks added, marked as theirs."""
    notes = "\n\n".join(f"[hook context] {text}" for text in context)
    return f"{prompt}\n\n{notes}" if notes else prompt


async def keep_going(
    hooks: Hooks,
    result: TurnResult,
    resume: Callable[[str], Awaitable[TurnResult]],
    *,
    event: HookEvent = HookEvent.STOP,
    value: str | None = None,
    payload: Mapping[str, Any] | None = None,
) -> TurnResult:
    """Stop or SubagentStop: while a hook blocks the end of a completed turn, the agent
    goes on with the hook's reason as its next instruction (`resume`)."""
    active = False
    for _ in range(MAX_STOP_CONTINUATIONS):
        if result.status != "completed" or not hooks.has(event):
            return result
        verdict = await hooks.run(
            event,
            value,
            {
                **(payload or {}),
                "stop_hook_active": active,
                "last_assistant_message": result.final_text,
            },
        )
        if not verdict.blocked:
            return result
        active = True
        earlier = result.steps
        result = await resume(f"[{event} hook] {verdict.reason}")
        result.steps += earlier
    return result


async def session_end(hooks: Hooks, reason: str = "other") -> None:
    if hooks.has(HookEvent.SESSION_END):
        await hooks.run(HookEvent.SESSION_END, reason, {"reason": reason})
