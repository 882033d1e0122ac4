"""update_plan, checklist_write, remember, revert_turn and handle_read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from codewhale.handles import HandleError
from codewhale.permissions import ApprovalClass, Mode, relative_to_workspace
from codewhale.private_files import private_dir, private_opener
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult
from codewhale.tools.files import write_regular
from codewhale.tools.workspace_fs import remove
from codewhale.work_state import STATUSES, Item

_ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "text": {"type": "string"},
        "status": {"type": "string", "enum": list(STATUSES)},
    },
    "required": ["text", "status"],
}


def _items(raw: Any, *, field: str) -> list[Item]:
    if not isinstance(raw, list) or not raw:
        raise ToolError(f"{field} must be a non-empty list")
    items = []
    for position, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
            raise ToolError(f"{field}[{position}] needs a 'text' string")
        status = entry.get("status", "pending")
        if status not in STATUSES:
            raise ToolError(f"{field}[{position}].status must be one of {', '.join(STATUSES)}")
        items.append(Item(str(entry.get("id") or position), entry["text"], status))
    if sum(item.status == "in_progress" for item in items) > 1:
        raise ToolError("at most one item may be in_progress at a time")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise ToolError(f"{field} ids must be unique")
    return items


class UpdatePlan(Tool):
    name = "update_plan"
    description = (
        "Record or revise the plan: ordered steps with status pending, in_progress or "
        "completed (one in_progress at a time). Shown to the user in the Work sidebar."
    )
    parameters = {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "plan": {"type": "array", "items": _ITEM_SCHEMA},
        },
        "required": ["plan"],
    }
    approval = ApprovalClass.SUGGEST
    plan_artifact = True

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        context.work.plan = _items(arguments["plan"], field="plan")
        context.work.explanation = str(arguments.get("explanation") or "")
        return ToolResult("Plan updated.\n" + context.work.render_plan())


class ChecklistWrite(Tool):
    name = "checklist_write"
    description = (
        "Replace the checklist of concrete work items (ids, text, status pending/in_progress/"
        "completed; one in_progress at a time). Returns the completion percentage."
    )
    parameters = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": _ITEM_SCHEMA}},
        "required": ["items"],
    }
    approval = ApprovalClass.SUGGEST
    plan_artifact = True

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        context.work.checklist = _items(arguments["items"], field="items")
        return ToolResult(context.work.render_checklist())


class Remember(Tool):
    name = "remember"
    description = (
        "Append a durable note to the user's memory file (added to future system prompts). "
        "Use for preferences and facts worth keeping across sessions."
    )
    parameters = {
        "type": "object",
        "properties": {"note": {"type": "string"}},
        "required": ["note"],
    }
    # Memory is the user's own notebook, not the workspace: no write approval (spec §12).
    approval = ApprovalClass.AUTO

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        if context.mode is Mode.PLAN:
            # Plan mode changes nothing that outlives the session, the user's memory included.
            raise ToolError(
                "Plan mode is read-only: remember is disabled. Ask the user to switch to "
                "Agent mode, or include the note in the plan."
            )
        if not context.memory_enabled or context.memory_file is None:
            raise ToolError(
                "memory is disabled; enable it with [memory] enabled = true in the config "
                "or CODEWHALE_MEMORY=on"
            )
        note = " ".join(arguments["note"].split())
        if not note:
            raise ToolError("note must not be empty")
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        private_dir(context.memory_file.parent)
        with open(context.memory_file, "a", encoding="utf-8", opener=private_opener) as handle:
            handle.write(f"- ({stamp}) {note}\n")
        return ToolResult(f"Remembered: {note}")


class RevertTurn(Tool):
    name = "revert_turn"
    description = (
        "Restore the workspace files changed in the last N turns (default 1) to their "
        "content before those turns. The conversation is not changed."
    )
    parameters = {
        "type": "object",
        "properties": {"turns": {"type": "integer", "description": "how many turns, >= 1"}},
    }
    approval = ApprovalClass.SUGGEST

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        count = int(arguments.get("turns") or 1)
        if count < 1:
            raise ToolError("turns must be at least 1")
        images = context.journal.take(count)
        if not images:
            raise ToolError("no file changes to revert: no earlier turn wrote files")
        restored: set[str] = set()
        refused: list[str] = []
        for path, image in images:
            label = relative_to_workspace(context.workspace, path)
            try:
                if image is None:
                    # Removes a name only, in its own directory: never writes through.
                    remove(context.workspace, path, label, missing_ok=True)
                else:
                    # The bytes as they were read, and the mode: no decoding on the way back.
                    write_regular(
                        path, image.data, label, workspace=context.workspace, mode=image.mode
                    )
                # The app's own write: /rewind must not take it for a change by hand.
                context.after_write(path, None if image is None else image.data)
            except ToolError as error:
                refused.append(str(error))
            except OSError as error:
                refused.append(f"{label}: {error.strerror}")
            else:
                restored.add(label)
        lines = [f"Restored {len(restored)} file(s): {', '.join(sorted(restored)) or 'none'}"]
        lines += [f"Not restored: {reason}" for reason in refused]
        return ToolResult("\n".join(lines), ok=not refused)


class HandleRead(Tool):
    name = "handle_read"
    description = (
        "Read a stored handle (large tool output, transcript, RLM result) by exactly one "
        "projection: slice {start,end,unit}, range {start,end} (1-based lines), count, "
        "jsonpath (RFC 9535), or introspect. max_chars default 12000, at most 50000."
    )
    parameters = {
        "type": "object",
        "properties": {
            "handle": {
                "type": ["string", "object"],
                "description": "session_id/name or var_handle",
            },
            "slice": {"type": "object"},
            "range": {"type": "object"},
            "count": {"type": "boolean"},
            "jsonpath": {"type": "string"},
            "introspect": {"type": "boolean"},
            "max_chars": {"type": "integer"},
        },
        "required": ["handle"],
    }
    # Replies are capped by max_chars (at most 50000); offloading one into yet another
    # handle would make most of a big payload unreachable.
    bounded_output = True

    def summary(self, arguments: Mapping[str, Any]) -> str:
        handle = arguments.get("handle")
        return handle if isinstance(handle, str) else str((handle or {}).get("name", ""))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            # Off the event loop: a thread, and a worker process for big JSONPath queries.
            reply = await context.handles.read_async(arguments)
        except HandleError as error:
            raise ToolError(str(error)) from None
        return ToolResult(json.dumps(reply, ensure_ascii=False, indent=2))
