"""A persisted conversation rebuilt as the cells a live turn makes (resume, the agent screen).

Messages hold less than the live events did: no durations, no `ok` flag and, for
`write_file`, no diff. What is missing is worked out from the message where it can be
(a failed call's `Error:` text, the diff inside `edit_file`'s result, `apply_patch`'s
patch, a new file's content) and otherwise left out.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from textual.widget import Widget

from codewhale.runtime import events
from codewhale.runtime.events import AgentSnapshot
from codewhale.tui.attachments import split_attachments
from codewhale.tui.diff_view import DiffView, looks_like_diff
from codewhale.tui.transcript import (
    AgentCell,
    AssistantMessage,
    Notice,
    Reasoning,
    ToolCell,
    UserMessage,
    agent_heading,
)

# Only the end of a long conversation is mounted (the transcript virtualises nothing yet).
HISTORY_MESSAGES = 200
# The keys Tool.summary looks at, with the agent tools' own, for a cell's one-line summary.
SUMMARY_KEYS = ("path", "command", "url", "pattern", "query", "note", "agent_id", "description")
FAILED_PREFIXES = ("Error:", "Cancelled by the user.", "[interrupted by the user]")
CONTINUABLE = "continuable: open it and press Continue"
NO_RESULT = "(no result was recorded for this call)"
ASSIGNMENT = "Assignment metadata:"  # how spawn.assignment_message begins


@dataclass
class History:
    widgets: list[Widget] = field(default_factory=list)
    # Calls with no result yet (a child's tool still running): live events finish them.
    pending: dict[str, ToolCell] = field(default_factory=dict)
    agents: dict[str, AgentCell] = field(default_factory=dict)


def rebuild(
    messages: list[dict[str, Any]],
    agents: Mapping[str, AgentSnapshot] | None = None,
    *,
    live: bool = False,
) -> History:
    """Cells for the last HISTORY_MESSAGES messages; `agents` settles the sub-agent cells.

    `live`: the conversation is still running, so a call without a result is still
    running too; otherwise it never got one (a crash) and is shown so.
    """
    history = History()
    known = agents or {}
    open_calls: dict[str, ToolCell] = {}
    for message in messages[-HISTORY_MESSAGES:]:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if role == "user" and text.strip() and not text.startswith("<codewhale:"):
            typed, attached = split_attachments(text)
            history.widgets.append(UserMessage(typed))
            history.widgets += [Notice(item.chip(), "attachment") for item in attached]
        elif role == "assistant":
            # A result answers a call of the assistant message just before it (ids repeat
            # across steps with some providers).
            open_calls = {}
            if reasoning := message.get("reasoning_content"):
                history.widgets.append(Reasoning(str(reasoning)))
            if text.strip():
                history.widgets.append(AssistantMessage(text))
            for call in message.get("tool_calls") or ():
                cell = _tool_cell(call)
                open_calls[cell.call_id] = cell
                history.widgets.append(cell)
        elif role == "tool":
            answered = open_calls.pop(str(message.get("tool_call_id")), None)
            if answered is not None:
                _finish(history, answered, text, known)
    if live:
        history.pending = open_calls
    else:
        for cell in open_calls.values():
            unanswered = events.ToolCallFinished(
                call_id=cell.call_id, name=cell.name_, ok=False, output_preview=NO_RESULT
            )
            cell.finish(unanswered, timed=False)
    return history


def child_conversation(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A child's own part of its messages: after its system prompts (and a forked child's
    copy of its opener's conversation) and after its assignment, which is shown apart."""
    start = max((i + 1 for i, m in enumerate(messages) if m.get("role") == "system"), default=0)
    first = messages[start] if start < len(messages) else {}
    if first.get("role") == "user" and str(first.get("content")).startswith(ASSIGNMENT):
        start += 1
    return messages[start:]


def _tool_cell(call: dict[str, Any]) -> ToolCell:
    function = call.get("function") or {}
    raw = str(function.get("arguments") or "")
    return ToolCell(
        events.ToolCallStarted(
            call_id=str(call.get("id")),
            name=str(function.get("name") or "?"),
            arguments=raw,
            summary=summary_of(_arguments(raw)),
        )
    )


def _finish(
    history: History, cell: ToolCell, result: str, agents: Mapping[str, AgentSnapshot]
) -> None:
    """Show the result, then what the call made (a diff, a sub-agent) right under it."""
    arguments = _arguments(cell.raw_arguments)
    diff = diff_of(cell.name_, arguments, result)
    finished = events.ToolCallFinished(
        call_id=cell.call_id,
        name=cell.name_,
        ok=not result.startswith(FAILED_PREFIXES),
        output_preview=result[:400],
        display=diff,
    )
    cell.finish(finished, timed=False)
    after = history.widgets.index(cell) + 1
    if diff is not None:
        history.widgets.insert(after, DiffView(diff))
    elif cell.name_ == "agent_open" and (agent := _agent_cell(result, agents)) is not None:
        history.agents[agent.agent_id] = agent
        history.widgets.insert(after, agent)


def _agent_cell(result: str, agents: Mapping[str, AgentSnapshot]) -> AgentCell | None:
    """The cell of the child an agent_open opened, settled as its record stands now."""
    try:
        projection = json.loads(result)
    except ValueError:
        return None
    if not isinstance(projection, dict) or not projection.get("agent_id"):
        return None
    agent_id = str(projection["agent_id"])
    snapshot = agents.get(agent_id)
    nickname = snapshot.nickname if snapshot else str(projection.get("nickname", agent_id))
    type_name = snapshot.type if snapshot else str(projection.get("type", ""))
    description = snapshot.description if snapshot else str(projection.get("description", ""))
    cell = AgentCell(agent_id, agent_heading(nickname, type_name, description))
    if snapshot is None:
        cell.settle("not in this session's records", "")
    elif snapshot.continuable:
        cell.settle(snapshot.status, CONTINUABLE)
    elif snapshot.terminal:
        cell.settle(snapshot.status, "")
    elif snapshot.status == "running":
        cell.running(snapshot.activity or "working")
    return cell


def _arguments(raw: str) -> dict[str, Any]:
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


def summary_of(arguments: Mapping[str, Any]) -> str:
    for key in SUMMARY_KEYS:
        if isinstance(arguments.get(key), str):
            return str(arguments[key])[:80]
    return ""


def diff_of(name: str, arguments: Mapping[str, Any], result: str) -> str | None:
    """The diff an edit made, as far as its persisted call and result still say."""
    if result.startswith(FAILED_PREFIXES):
        return None
    if name == "edit_file":
        # "Edited calc.py.\n<the diff>"
        rest = result.split("\n", 1)[1] if "\n" in result else ""
        return rest if looks_like_diff(rest) else None
    if name == "apply_patch" and isinstance(arguments.get("patch"), str):
        patch = str(arguments["patch"])
        return patch if looks_like_diff(patch) else None
    if name == "write_file" and result.startswith("Created "):
        # A new file: its whole content was added. (An overwrite's old text is not kept.)
        path, content = arguments.get("path"), arguments.get("content")
        if isinstance(path, str) and isinstance(content, str):
            lines = difflib.unified_diff(
                [], content.splitlines(keepends=True), fromfile="/dev/null", tofile=f"b/{path}"
            )
            return "".join(line if line.endswith("\n") else line + "\n" for line in lines) or None
    return None
