"""shell_output and shell_kill: read and stop the background tasks exec_shell started."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from codewhale.permissions import ApprovalClass
from codewhale.tools.background import MAX_BLOCK_MS, BackgroundTask
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

# What one shell_output answer carries of a task's output; the rest on the next call.
MAX_OUTPUT_CHARS = 24_000


def _task(arguments: Mapping[str, Any], context: ToolContext) -> BackgroundTask:
    task_id = str(arguments.get("task_id") or "")
    task = context.background.get(task_id)
    if task is None:
        known = ", ".join(t.task_id for t in context.background.running()) or "none running"
        raise ToolError(f"no background task '{task_id}' ({known})")
    return task


class ShellOutput(Tool):
    name = "shell_output"
    description = (
        "What a background task (exec_shell with background: true) printed, and whether it "
        "still runs. `since`: the offset a previous call returned, for only the new output; "
        "`block`: wait for the task to end (at most timeout_ms)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "task_id": {"type": "string"},
            "since": {"type": "integer", "description": "offset from the previous answer"},
            "block": {"type": "boolean"},
            "timeout_ms": {"type": "integer", "description": f"1..{MAX_BLOCK_MS}"},
        },
        "required": ["task_id"],
    }
    approval = ApprovalClass.AUTO
    bounded_output = True
    timeout_secs = MAX_BLOCK_MS / 1000 + 60

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("task_id") or "")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        task = _task(arguments, context)
        if arguments.get("block") is True:
            limit = min(max(int(arguments.get("timeout_ms") or MAX_BLOCK_MS), 1), MAX_BLOCK_MS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(task.ended.wait(), limit / 1000)
        since = arguments.get("since")
        text, offset = task.since(since if isinstance(since, int) and since > 0 else 0)
        if len(text) > MAX_OUTPUT_CHARS:
            cut = len(text) - MAX_OUTPUT_CHARS
            text = f"[… {cut} earlier characters left out]\n{text[cut:]}"
        return ToolResult(
            f"[{task.task_id} {task.status()}; next since={offset}]\n{text}".rstrip(),
            ok=task.exit_code in (None, 0),
        )


class ShellKill(Tool):
    name = "shell_kill"
    description = "Stop a background task (its whole process group) and return its last output."
    parameters = {
        "type": "object",
        "properties": {"task_id": {"type": "string"}},
        "required": ["task_id"],
    }
    approval = ApprovalClass.AUTO

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("task_id") or "")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        task = _task(arguments, context)
        if task.requester != context.session_id:
            raise ToolError(f"{task.task_id} was started by another agent; only it may stop it")
        await context.background.kill(task)
        text, _ = task.since(max(task.total - 2_000, 0))
        return ToolResult(f"[{task.task_id} {task.status()}]\n{text}".rstrip())
