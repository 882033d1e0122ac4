"""The hooks around one tool call: PreToolUse, PermissionRequest, Notification, PostToolUse
and PostToolUseFailure, with the payloads Claude Code sends (docs/HOOKS.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from codewhale.hooks.names import HookEvent
from codewhale.hooks.verdict import HookVerdict
from codewhale.permissions import Mode
from codewhale.tools.base import ToolContext, ToolError, ToolResult

# A child's context carries "agent:<id>" as its session id (subagents/builder.py).
_CHILD_PREFIX = "agent:"


class ToolHooks:
    """One dispatcher's view of the session's hooks; free when no hook is declared."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self._notices: set[asyncio.Task[Any]] = set()

    async def before(self, tool: str, arguments: dict[str, Any], call_id: str) -> HookVerdict:
        """PreToolUse: raises ToolError (stderr or the reason as the result) on a block."""
        if not self.context.hooks.has(HookEvent.PRE_TOOL_USE):
            return HookVerdict()
        verdict = await self._run(HookEvent.PRE_TOOL_USE, tool, arguments, tool_use_id=call_id)
        if verdict.blocked or verdict.stop:
            said = verdict.reason or verdict.stop_reason or "no reason given"
            raise ToolError(f"a PreToolUse hook blocked this {tool} call: {said}")
        return verdict

    async def permission_request(self, tool: str, arguments: dict[str, Any]) -> bool:
        """PermissionRequest: True when a hook allowed the call; raises when one denied it."""
        if not self.context.hooks.has(HookEvent.PERMISSION_REQUEST):
            return False
        verdict = await self._run(HookEvent.PERMISSION_REQUEST, tool, arguments)
        if verdict.blocked:
            said = verdict.reason or "no reason given"
            raise ToolError(f"a PermissionRequest hook denied this {tool} call: {said}")
        return verdict.permission == "allow"

    def notify(self, message: str) -> None:
        """Notification, in the background: the question is not held up by the hook."""
        hooks = self.context.hooks
        if not hooks.has(HookEvent.NOTIFICATION):
            return
        payload = {"message": message, "notification_type": "permission_prompt"}
        task = asyncio.get_running_loop().create_task(
            hooks.run(HookEvent.NOTIFICATION, "permission_prompt", self._common(payload))
        )
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def around(
        self,
        tool: str,
        arguments: dict[str, Any],
        call_id: str,
        execute: Callable[[], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Run the call, then PostToolUse (it ran) or PostToolUseFailure (it raised)."""
        hooks = self.context.hooks
        try:
            result = await execute()
        except ToolError as error:
            if not hooks.has(HookEvent.POST_TOOL_USE_FAILURE):
                raise
            verdict = await self._run(
                HookEvent.POST_TOOL_USE_FAILURE,
                tool,
                arguments,
                tool_use_id=call_id,
                error=self.context.redactor.redact(str(error)),
                is_interrupt=False,
            )
            noted = _with_notes(str(error), verdict, HookEvent.POST_TOOL_USE_FAILURE)
            raise ToolError(noted) from None
        if not hooks.has(HookEvent.POST_TOOL_USE):
            return result
        response = {"output": self.context.redactor.redact(result.output), "ok": result.ok}
        verdict = await self._run(
            HookEvent.POST_TOOL_USE, tool, arguments, tool_use_id=call_id, tool_response=response
        )
        output = _with_notes(result.output, verdict, HookEvent.POST_TOOL_USE)
        return ToolResult(output, ok=result.ok, display=result.display)

    async def _run(
        self, event: HookEvent, tool: str, arguments: dict[str, Any], **extra: Any
    ) -> HookVerdict:
        payload = {"tool_name": tool, "tool_input": self._claude_input(arguments), **extra}
        return await self.context.hooks.run(event, tool, self._common(payload))

    def _common(self, payload: dict[str, Any]) -> dict[str, Any]:
        common: dict[str, Any] = {"permission_mode": claude_mode(self.context)}
        session = self.context.session_id
        if session.startswith(_CHILD_PREFIX):
            common["agent_id"] = session.removeprefix(_CHILD_PREFIX)
        return {**common, **payload}

    def _claude_input(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Our arguments, plus `file_path` (absolute) where Claude Code's scripts read it."""
        path = arguments.get("path")
        if isinstance(path, str) and "file_path" not in arguments:
            return {**arguments, "file_path": str(self.context.workspace / path)}
        return arguments


def claude_mode(context: ToolContext) -> str:
    """The session's mode in Claude Code's words, which hook scripts test."""
    if context.mode is Mode.YOLO:
        return "bypassPermissions"
    if context.mode is Mode.PLAN:
        return "plan"
    return "acceptEdits" if context.modes.accept_edits else "default"


def _with_notes(text: str, verdict: HookVerdict, event: HookEvent) -> str:
    """The result with what the hooks told the model (a block's reason, added context)."""
    notes = [*([verdict.reason] if verdict.blocked and verdict.reason else []), *verdict.context]
    if verdict.stop and verdict.stop_reason:
        notes.append(f"Stop and report to the user: {verdict.stop_reason}")
    return "\n\n".join([text, *(f"[{event} hook] {note}" for note in notes)])
