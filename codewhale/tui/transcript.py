"""The conversation: messages, streamed answers, reasoning, tool cells and notices."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from codewhale.runtime import events
from codewhale.sanitize import clean_text
from codewhale.tui.diff_view import DiffView, looks_like_diff
from codewhale.tui.sidebar import AgentRow

if TYPE_CHECKING:
    from codewhale.tui.history import History

MAX_MOUNTED = 300  # older cells are dropped so long sessions stay smooth
# A tool cell shows each argument up to here (a written file's content is in its diff).
MAX_ARGUMENT_CHARS = 600
PREVIEW_LINES = 3
PREVIEW_WIDTH = 120


def agent_heading(nickname: str, type_name: str, description: str) -> str:
    return f"{nickname} · {type_name} · {description}"


class UserMessage(Static):
    def __init__(self, text: str, *, steer: bool = False) -> None:
        label = Text("› steer  " if steer else "› ", style="bold")
        label.append(clean_text(text))
        super().__init__(label, markup=False, classes="steer" if steer else "")


class AssistantMessage(Markdown):
    """Streams with MarkdownStream instead of re-rendering the document per delta.

    Built with `text` (a replayed answer) it never streams, so it starts no stream task.
    """

    def __init__(self, text: str = "") -> None:
        super().__init__(clean_text(text))
        self.stream: MarkdownStream | None = None
        self.answer = text

    async def add_fragment(self, fragment: str) -> None:
        # Not `append`: MarkdownStream calls Markdown.append to render.
        if self.stream is None:
            self.stream = Markdown.get_stream(self)
        self.answer += fragment
        await self.stream.write(clean_text(fragment))

    async def finish(self, suffix: str = "", *, content: str | None = None) -> None:
        """End the stream; `content` (the whole answer) replaces what streamed if they differ."""
        if suffix and self.stream is not None:
            await self.stream.write(suffix)
        if self.stream is not None:
            await self.stream.stop()
        if content and content != self.answer:
            # Deltas were missed (an agent screen opened mid-answer): show the whole answer.
            self.answer = content
            await self.update(clean_text(content) + suffix)


class Reasoning(Collapsible):
    def __init__(self, text: str = "") -> None:
        self.thinking = clean_text(text)
        self.body = Static(self.thinking, markup=False)
        super().__init__(self.body, title="thinking", collapsed=True)

    def add_fragment(self, fragment: str) -> None:
        self.thinking += clean_text(fragment)
        self.body.update(self.thinking)

    def replace(self, text: str) -> None:
        self.thinking = clean_text(text)
        self.body.update(self.thinking)


def argument_text(raw: str) -> Text:
    """`key: value` lines, each value cut at MAX_ARGUMENT_CHARS; raw text if not an object."""
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return Text(clean_text(raw[:MAX_ARGUMENT_CHARS]), style="dim")
    text = Text(style="dim")
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(shown) > MAX_ARGUMENT_CHARS:
            shown = f"{shown[:MAX_ARGUMENT_CHARS]}… ({len(shown)} characters)"
        text.append(f"{clean_text(str(key))}: ", style="bold")
        text.append(clean_text(shown) + "\n")
    text.rstrip()
    return text


class ToolCell(Collapsible):
    """One tool call: name, key argument, status and duration; expands to arguments and output."""

    def __init__(self, event: events.ToolCallStarted) -> None:
        self.call_id = event.call_id
        self.name_ = event.name
        self.raw_arguments = event.arguments
        self.summary = clean_text(event.summary).replace("\n", " ")[:80]
        self.started = time.monotonic()
        self.arguments = Static(argument_text(event.arguments), classes="tool-arguments")
        self.output = Static("", markup=False)
        super().__init__(
            self.arguments, self.output, title=self._heading("…"), collapsed=True, classes="tool"
        )

    def _heading(self, status: str) -> str:
        # Collapsible titles are markup: the model-chosen summary must not be read as tags.
        return escape(f"{status} {self.name_} {self.summary}".rstrip())

    def finish(self, event: events.ToolCallFinished, *, timed: bool = True) -> str | None:
        """Show the result; returns the diff the call made, if it made one."""
        glyph = "✓" if event.ok else "✗"
        duration = f"  {event.duration_ms / 1000:.1f}s" if timed else ""
        self.title = self._heading(glyph) + duration
        diff = event.display if event.display and looks_like_diff(event.display) else None
        # With a diff the diff view below says what changed; the output keeps its first line.
        shown = event.output_preview.split("\n", 1)[0] if diff else event.display
        self.output.update(clean_text(shown or event.output_preview))
        self.set_class(not event.ok, "failed")
        return diff


class AgentCell(Static, can_focus=True):
    """A sub-agent in the conversation: its latest output while it runs, a footer when done.

    Click or Enter opens its agent screen, as its Work sidebar row does.
    """

    DEFAULT_CSS = """
    AgentCell:focus { background: $boost; }
    """

    def __init__(self, agent_id: str, title: str) -> None:
        super().__init__("", classes="agent-cell", markup=False)
        self.agent_id = agent_id
        self.heading = clean_text(title)
        self.tail = ""
        self.footer = "queued"
        self._redraw()

    def progress(self, tail: str) -> None:
        """`tail` is the end of the child's output as a whole, so it replaces the last one."""
        self.tail = clean_text(tail)
        self.footer = "running"
        self._redraw()

    def running(self, activity: str) -> None:
        self.footer = f"running · {clean_text(activity)}"
        self._redraw()

    def settle(self, status: str, detail: str) -> None:
        self.footer = f"{status}: {clean_text(detail)[:200]}" if detail else status
        self._redraw()

    def _redraw(self) -> None:
        lines = [line for line in self.tail.splitlines() if line.strip()][-PREVIEW_LINES:]
        # The end of a long line is what the child is writing now, so that end is kept.
        shown = [
            line if len(line) <= PREVIEW_WIDTH else "…" + line[-PREVIEW_WIDTH:] for line in lines
        ]
        body = "".join(f"  │ {line}\n" for line in shown)
        self.update(f"⧉ {self.heading}\n{body}  └ {self.footer}")

    def on_click(self) -> None:
        self.post_message(AgentRow.Selected(self.agent_id))

    def key_enter(self) -> None:
        self.post_message(AgentRow.Selected(self.agent_id))


class Notice(Static):
    def __init__(self, text: str, kind: str = "info") -> None:
        super().__init__(clean_text(text), markup=False, classes=f"notice {kind}")


class Transcript(VerticalScroll):
    """Applies engine events to a conversation on screen: the session's, or one child's."""

    def __init__(self, *, id: str = "transcript") -> None:
        super().__init__(id=id)
        self._answer: AssistantMessage | None = None
        self._reasoning: Reasoning | None = None
        self._tools: dict[str, ToolCell] = {}
        self._agents: dict[str, AgentCell] = {}

    async def reset(self) -> None:
        """Empty the transcript and forget its cells, so later events start new ones."""
        self._answer = None
        self._reasoning = None
        self._tools.clear()
        self._agents.clear()
        await self.remove_children()

    async def add(self, widget: Widget) -> None:
        await self.add_all([widget])

    async def add_all(self, widgets: Iterable[Widget]) -> None:
        """Mount in one batch, then drop the oldest cells past MAX_MOUNTED."""
        await self.mount_all(widgets)
        overflow = len(self.children) - MAX_MOUNTED
        if overflow > 0:
            await self.remove_children(list(self.children)[:overflow])
        self.scroll_end(animate=False)

    async def show_history(self, history: History) -> None:
        """Mount rebuilt cells; later events finish its open tool calls and update its agents."""
        self._tools.update(history.pending)
        self._agents.update(history.agents)
        await self.add_all(history.widgets)

    async def user(self, text: str, *, steer: bool = False) -> None:
        await self.add(UserMessage(text, steer=steer))

    async def notice(self, text: str, kind: str = "info") -> None:
        await self.add(Notice(text, kind))

    async def agent_envelope(self, envelope: dict, title: str, detail: str) -> None:
        """Show a child's lifecycle inline: created on open, fed progress, settled at the end."""
        agent_id = envelope["agent_id"]
        cell = self._agents.get(agent_id)
        if cell is None:
            cell = self._agents[agent_id] = AgentCell(agent_id, title)
            await self.add(cell)
        kind = envelope["kind"]
        if kind == "progress" and envelope.get("text_tail"):
            cell.progress(envelope["text_tail"])
        elif kind in ("started", "tool_call_started"):
            cell.running(envelope.get("tool", "thinking"))
        elif kind in ("completed", "failed", "cancelled", "interrupted"):
            cell.settle(kind, detail)

    async def apply(self, event: events.Event) -> None:
        if isinstance(event, events.ReasoningDelta):
            if self._reasoning is None:
                self._reasoning = Reasoning()
                await self.add(self._reasoning)
            self._reasoning.add_fragment(event.text)
        elif isinstance(event, events.AssistantDelta):
            if self._answer is None:
                self._answer = AssistantMessage()
                await self.add(self._answer)
            await self._answer.add_fragment(event.text)
            self.scroll_end(animate=False)
        elif isinstance(event, events.AssistantMessage):
            await self._finish_answer(event)
        elif isinstance(event, events.ToolCallStarted):
            # A call already shown (rebuilt from history while it ran) keeps its cell.
            if event.call_id not in self._tools:
                cell = ToolCell(event)
                self._tools[event.call_id] = cell
                await self.add(cell)
        elif isinstance(event, events.ToolCallFinished):
            started = self._tools.pop(event.call_id, None)
            diff = started.finish(event) if started is not None else None
            # Right under its call (parallel calls may have added cells since), unless the
            # call's cell was already dropped past MAX_MOUNTED.
            if diff is not None and started is not None and started.parent is self:
                await self.mount(DiffView(diff), after=started)
                self.scroll_end(animate=False)
        elif isinstance(event, events.SteerAccepted):
            await self.notice(f"steer accepted: {event.text}", "steer")
        elif isinstance(event, events.ErrorEvent):
            await self.notice(event.message, "error")
        elif isinstance(event, events.TurnComplete) and event.status == "interrupted":
            await self.notice("turn cancelled; sub-agents keep running", "warning")

    async def _finish_answer(self, event: events.AssistantMessage) -> None:
        """Close the streamed cells; the event's whole text fills in any deltas not seen."""
        if event.reasoning and self._reasoning is not None:
            if self._reasoning.thinking != clean_text(event.reasoning):
                self._reasoning.replace(event.reasoning)
        elif event.reasoning and self._answer is not None:
            await self.mount(Reasoning(event.reasoning), before=self._answer)
        elif event.reasoning:
            await self.add(Reasoning(event.reasoning))
        suffix = " *(interrupted)*" if event.interrupted else ""
        if self._answer is not None:
            await self._answer.finish(suffix, content=event.content)
        elif event.content.strip():
            await self.add(AssistantMessage(event.content + suffix))
        self._answer = None
        self._reasoning = None
