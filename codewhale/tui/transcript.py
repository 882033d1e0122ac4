"""The conversation: messages, streamed answers, reasoning, tool cells and notices."""

from __future__ import annotations

import time

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Markdown, Static

from codewhale.runtime import events
from codewhale.sanitize import clean_text

MAX_MOUNTED = 300  # older cells are dropped so long sessions stay smooth


class UserMessage(Static):
    def __init__(self, text: str, *, steer: bool = False) -> None:
        label = Text("› steer  " if steer else "› ", style="bold")
        label.append(clean_text(text))
        super().__init__(label, markup=False, classes="steer" if steer else "")


class AssistantMessage(Markdown):
    """Streams with MarkdownStream instead of re-rendering the document per delta."""

    def __init__(self) -> None:
        super().__init__("")
        self.stream = Markdown.get_stream(self)
        self.answer = ""

    async def add_fragment(self, fragment: str) -> None:
        # Not `append`: MarkdownStream calls Markdown.append to render.
        self.answer += fragment
        await self.stream.write(clean_text(fragment))

    async def finish(self, suffix: str = "") -> None:
        if suffix:
            await self.stream.write(suffix)
        await self.stream.stop()


class Reasoning(Collapsible):
    def __init__(self) -> None:
        self.body = Static("", markup=False)
        self.thinking = ""
        super().__init__(self.body, title="thinking", collapsed=True)

    def add_fragment(self, fragment: str) -> None:
        self.thinking += clean_text(fragment)
        self.body.update(self.thinking)


class ToolCell(Collapsible):
    """One tool call: name, key argument, status and duration; expands to its output."""

    def __init__(self, event: events.ToolCallStarted) -> None:
        self.call_id = event.call_id
        self.name_ = event.name
        self.summary = clean_text(event.summary).replace("\n", " ")[:80]
        self.started = time.monotonic()
        self.output = Static("", markup=False)
        super().__init__(self.output, title=self._heading("…"), collapsed=True, classes="tool")

    def _heading(self, status: str) -> str:
        return f"{status} {self.name_} {self.summary}".rstrip()

    def finish(self, event: events.ToolCallFinished) -> None:
        glyph = "✓" if event.ok else "✗"
        self.title = f"{self._heading(glyph)}  {event.duration_ms / 1000:.1f}s"
        self.output.update(clean_text(event.display or event.output_preview))
        self.set_class(not event.ok, "failed")


class AgentCell(Static):
    """A sub-agent in the conversation: its latest output while it runs, a footer when done."""

    def __init__(self, agent_id: str, title: str) -> None:
        super().__init__("", classes="agent-cell", markup=False)
        self.agent_id = agent_id
        self.heading = clean_text(title)
        self.tail = ""
        self.footer = "queued"
        self._redraw()

    def progress(self, text: str) -> None:
        self.tail = (self.tail + clean_text(text))[-400:]
        self.footer = "running"
        self._redraw()

    def settle(self, status: str, detail: str) -> None:
        self.footer = f"{status}: {clean_text(detail)[:200]}" if detail else status
        self._redraw()

    def _redraw(self) -> None:
        lines = [line for line in self.tail.splitlines() if line.strip()][-3:]
        body = "\n".join(f"  │ {line[:120]}" for line in lines)
        self.update(f"⧉ {self.heading}\n{body + chr(10) if body else ''}  └ {self.footer}")


class Notice(Static):
    def __init__(self, text: str, kind: str = "info") -> None:
        super().__init__(clean_text(text), markup=False, classes=f"notice {kind}")


class Transcript(VerticalScroll):
    """Applies engine events to the visible conversation (called from the app's handler)."""

    def __init__(self) -> None:
        super().__init__(id="transcript")
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

    async def add(self, widget) -> None:
        await self.mount(widget)
        overflow = len(self.children) - MAX_MOUNTED
        for old in list(self.children)[: max(overflow, 0)]:
            await old.remove()
        self.scroll_end(animate=False)

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
            cell.footer = f"running · {envelope.get('tool', 'thinking')}"
            cell.progress("")
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
            if self._answer is not None:
                await self._answer.finish(" *(interrupted)*" if event.interrupted else "")
            self._answer = None
            self._reasoning = None
        elif isinstance(event, events.ToolCallStarted):
            cell = ToolCell(event)
            self._tools[event.call_id] = cell
            await self.add(cell)
        elif isinstance(event, events.ToolCallFinished):
            started = self._tools.pop(event.call_id, None)
            if started is not None:
                started.finish(event)
        elif isinstance(event, events.SteerAccepted):
            await self.notice(f"steer accepted: {event.text}", "steer")
        elif isinstance(event, events.ErrorEvent):
            await self.notice(event.message, "error")
        elif isinstance(event, events.TurnComplete) and event.status == "interrupted":
            await self.notice("turn cancelled; sub-agents keep running", "warning")
