"""A persisted conversation rebuilt as the cells a live turn makes (resume, the agent screen).

Messages hold less than the live events did: no durations, no `ok` flag and, for
`write_file`, no diff. What is missing is worked out from the message where it can be
(a failed call's `Error:` text, the diff inside `edit_file`'s result, `apply_patch`'s
patch, a new file's content) and otherwise left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from textual.widget import Widget

from codewhale.runtime import events
from codewhale.runtime.events import AgentSnapshot
from codewhale.tui.answer import AssistantMessage
from codewhale.tui.attachment_format import split_attachments
from codewhale.tui.diff_view import DiffView, looks_like_diff
from codewhale.tui.paste import resumed_message
from codewhale.tui.transcript import (
    AGENT_OPEN,
    AgentCell,
    Notice,
    Reasoning,
    ToolCell,
    agent_heading,
)

# The most messages one batch rebuilds (a Backlog's batches stay well under it).
HISTORY_MESSAGES = 200
# The keys Tool.summary looks at, with the agent tools' own, for a cell's one-line summary.
SUMMARY_KEYS = ("path", "command", "url", "pattern", "query", "note", "agent_id", "description")
FAILED_PREFIXES = ("Error:", "Cancelled by the user.", "[interrupted by the user]")
CONTINUABLE = "continuable: open it and press Continue"
NO_RESULT = "(no result was recorded for this call)"
ASSIGNMENT = "Assignment metadata:"  # how spawn.assignment_message begins
# Rows a call takes, with the cell its result adds (a diff, a sub-agent), where it has one.
CALL_ROWS = {"edit_file": 2, "write_file": 2, "apply_patch": 2, AGENT_OPEN: 3}


@dataclass
class History:
    widgets: list[Widget] = field(default_factory=list)
    # Calls with no result yet (a child's tool still running): live events finish them.
    pending: dict[str, ToolCell] = field(default_factory=dict)
    agents: dict[str, AgentCell] = field(default_factory=dict)
    # Each cell's message (a tool result's cells count as its call's), by its index in the
    # whole conversation: the transcript prunes whole messages and knows where to reload.
    origins: dict[Widget, int] = field(default_factory=dict)


class Backlog:
    """The part of a conversation not on screen yet, rebuilt a batch of cells at a time
    from the newest back, so a resumed session mounts what is visible, not all of it."""

    def __init__(
        self,
        messages: list[dict[str, Any]],
        agents: Callable[[], Mapping[str, AgentSnapshot]] = dict,
        *,
        live: bool = False,
    ) -> None:
        # A copy: the live list grows as the session goes on (and compaction rewrites it).
        self.messages = list(messages)
        self.agents = agents  # read per batch: a child may have finished since the last
        self.live = live
        self.first = next(
            (i for i, m in enumerate(self.messages) if m.get("role") != "system"),
            len(self.messages),
        )
        self.end = len(self.messages)  # messages from here on are shown (or were dropped)

    @property
    def exhausted(self) -> bool:
        return self.end <= self.first

    def rewind(self, end: int) -> None:
        """The cells of messages from `end` on were pruned: they are to be rebuilt again."""
        self.end = max(self.first, min(end, len(self.messages)))

    def older(self, rows: int) -> History:
        """Cells about `rows` rows high (some, while any are left) for the messages before
        those already given; a batch starts at a prompt or an answer, never at a result."""
        history = History()
        while not history.widgets and not self.exhausted:
            start = self.end
            estimate = 0
            while start > self.first and estimate < rows:
                if self.end - start >= HISTORY_MESSAGES // 2:
                    break
                start -= 1
                estimate += _rows_of(self.messages[start])
            while start > self.first and self.messages[start].get("role") == "tool":
                start -= 1
            history = rebuild(
                self.messages[start : self.end],
                self.agents(),
                live=self.live and self.end == len(self.messages),
                first=start,
            )
            self.end = start
        return history


def _rows_of(message: dict[str, Any]) -> int:
    """About how many rows a message's cells take on screen (wrapping aside): enough to
    size a batch, which the transcript tops up when it falls short of the view."""
    text = message.get("content")
    lines = text.count("\n") + 1 if isinstance(text, str) and text.strip() else 0
    if message.get("role") == "user":
        return 1 + lines  # a margin above
    if message.get("role") != "assistant":
        return 0  # a result shows in its call's cell, or as a cell counted with the call
    rows = lines + bool(message.get("reasoning_content"))
    for call in message.get("tool_calls") or ():
        rows += CALL_ROWS.get(str((call.get("function") or {}).get("name")), 1)
    return rows


def rebuild(
    messages: list[dict[str, Any]],
    agents: Mapping[str, AgentSnapshot] | None = None,
    *,
    live: bool = False,
    first: int = 0,
) -> History:
    """Cells for the last HISTORY_MESSAGES messages; `agents` settles the sub-agent cells.

    `live`: the conversation is still running, so a call without a result is still
    running too; otherwise it never got one (a crash) and is shown so. `first` is the
    index of `messages[0]` in the whole conversation.
    """
    history = History()
    known = agents or {}
    open_calls: dict[str, ToolCell] = {}
    shown = messages[-HISTORY_MESSAGES:]
    origin = first + len(messages) - len(shown)
    caller = origin  # the assistant message whose calls the next results answer
    for index, message in enumerate(shown, start=origin):
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        made = len(history.widgets)
        if role == "user" and text.strip() and not text.startswith("<codewhale:"):
            typed, attached = split_attachments(text)
            history.widgets.append(resumed_message(typed))
            history.widgets += [Notice(item.chip(), "attachment") for item in attached]
        elif role == "assistant":
            # A result answers a call of the assistant message just before it (ids repeat
            # across steps with some providers).
            open_calls = {}
            caller = index
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
            if answered is not None and (made_cell := _finish(history, answered, text, known)):
                history.origins[made_cell] = caller  # shown with the call it answers
            continue
        for widget in history.widgets[made:]:
            history.origins[widget] = index
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
) -> Widget | None:
    """Show the result. A diff the call made goes right under its cell; a sub-agent it
    opened takes the cell's place, as in a live turn. Returns the cell added, if any."""
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
    if diff is not None:
        made = DiffView(diff)
        history.widgets.insert(history.widgets.index(cell) + 1, made)
        return made
    if cell.name_ == AGENT_OPEN and (agent := _agent_cell(result, agents)) is not None:
        history.agents[agent.agent_id] = agent
        history.widgets[history.widgets.index(cell)] = agent
        history.origins.pop(cell, None)
        return agent
    return None


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
        cell.settle(snapshot.status, "", snapshot.summary)
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
            import difflib  # here: only a new file's diff needs it, not every resume

            lines = difflib.unified_diff(
                [], content.splitlines(keepends=True), fromfile="/dev/null", tofile=f"b/{path}"
            )
            return "".join(line if line.endswith("\n") else line + "\n" for line in lines) or None
    return None
