"""The conversation: messages, streamed answers, reasoning, tool cells and notices."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.markup import escape
from textual.widget import AwaitMount, Widget
from textual.widgets import Collapsible, Static

from codewhale.sanitize import clean_text
from codewhale.tui.diff_view import DiffView, looks_like_diff
from codewhale.tui.sidebar import AgentRow, laid_out_size, lay_out_if_resized
from codewhale.tui.status import Coalescer

if TYPE_CHECKING:
    from codewhale.runtime import events
    from codewhale.tui.answer import AssistantMessage
    from codewhale.tui.history import Backlog

MAX_MOUNTED = 300  # older cells are dropped so long sessions stay smooth...
PRUNE_BATCH = 50  # ...this many at a time: each remove lays out the transcript again
MIN_BATCH_ROWS = 10  # history mounted at a time, at the least (see Transcript._batch_rows)
# A tool cell shows each argument up to here (a written file's content is in its diff).
MAX_ARGUMENT_CHARS = 600
PREVIEW_LINES = 3
PREVIEW_WIDTH = 120
# Collapsible sets this class on mount, which styles the whole cell a second time; set
# from the start, it costs nothing.
FOLDED = "-collapsed"
# The tool that opens a sub-agent: the child's cell stands for the call.
AGENT_OPEN = "agent_open"


def __getattr__(name: str) -> Any:
    """`transcript.AssistantMessage`, as it was before the answer cell moved to tui/answer.py:
    imported on first use, so the first frame does not load Textual's Markdown widget."""
    if name == "AssistantMessage":
        from codewhale.tui.answer import AssistantMessage

        return AssistantMessage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def line_end(line: str, cells: int) -> str:
    """The end of `line` that fits in `cells` terminal cells (wide characters take two)."""
    end = line[-cells:]
    while cell_len(end) > cells:
        end = end[1:]
    return end


def agent_heading(nickname: str, type_name: str, description: str) -> str:
    return f"{nickname} · {type_name} · {description}"


class UserMessage(Static):
    def __init__(self, text: str, *, steer: bool = False) -> None:
        label = Text("› steer  " if steer else "› ", style="bold")
        label.append(clean_text(text))
        super().__init__(label, markup=False, classes="steer" if steer else "")


class Folded(Collapsible):
    """A collapsed cell whose contents are mounted when it is first opened: most cells are
    never opened, and a folded tool cell is then three widgets instead of five."""

    def __init__(self, *contents: Widget, title: str, classes: str = "") -> None:
        super().__init__(title=title, collapsed=True, classes=f"{classes} {FOLDED}")
        self._unmounted = list(contents)

    def watch_collapsed(self, collapsed: bool) -> None:
        if not collapsed and self._unmounted:
            contents, self._unmounted = self._unmounted, []
            self.query_one(Collapsible.Contents).mount_all(contents)


class Reasoning(Folded):
    """Collapsed reasoning; streamed fragments are only collected until it is opened."""

    def __init__(self, text: str = "") -> None:
        self._parts = [clean_text(text)]
        self.body = Static(self._parts[0], markup=False)
        super().__init__(self.body, title="thinking")

    @property
    def thinking(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0]

    def add_fragment(self, fragment: str) -> None:
        self._parts.append(clean_text(fragment))
        if not self.collapsed:  # folded, the body is not drawn: it is filled in on opening
            self.body.update(self.thinking)

    def replace(self, text: str) -> None:
        self._parts = [clean_text(text)]
        self.body.update(self._parts[0])

    def watch_collapsed(self, collapsed: bool) -> None:
        if not collapsed:
            self.body.update(self.thinking)
        super().watch_collapsed(collapsed)


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


class ToolCell(Folded):
    """One tool call: name, key argument, status and duration; expands to arguments and output."""

    def __init__(self, event: events.ToolCallStarted) -> None:
        self.call_id = event.call_id
        self.name_ = event.name
        self.raw_arguments = event.arguments
        self.summary = clean_text(event.summary).replace("\n", " ")[:80]
        self.started = time.monotonic()
        self.arguments = Static(argument_text(event.arguments), classes="tool-arguments")
        self.output = Static("", markup=False)
        super().__init__(self.arguments, self.output, title=self._heading("…"), classes="tool")

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
        # Its report's SUMMARY once it has finished: shown instead of its last lines.
        self.summary = ""
        self.footer = "queued"
        self._settled = False
        # Preview rows shown: while it runs the preview never shrinks, and it has a row from
        # the start, so a child's first output (most stream one line) does not change the
        # cell's height: twenty children starting to stream cost no layout.
        self._rows = 1
        self._drawn: tuple[int, str, Size] | None = None  # rows, footer and size last measured
        self._redraw()

    def progress(self, tail: str) -> None:
        """`tail` is the end of the child's output as a whole, so it replaces the last one."""
        self.tail = clean_text(tail)
        self.footer = "running"
        self._redraw()

    def running(self, activity: str) -> None:
        self.footer = f"running · {clean_text(activity)}"
        self._redraw()

    def settle(self, status: str, detail: str, summary: str = "") -> None:
        """Ended as `status` (`detail`: why); `summary` is its report's SUMMARY, if any."""
        self.footer = f"{status}: {clean_text(detail)[:200]}" if detail else status
        self.summary = " ".join(clean_text(summary).split())
        self._settled = True
        self._redraw()

    def _redraw(self) -> None:
        size = laid_out_size(self)
        width = size.width
        keep = min(PREVIEW_WIDTH, width - len("  │ …")) if width else PREVIEW_WIDTH
        if self.summary:
            # A report ends with RISKS and BLOCKERS ("None."): its SUMMARY says what it did.
            line = f"SUMMARY: {self.summary}"
            shown = [line if cell_len(line) <= keep else set_cell_size(line, keep - 1) + "…"]
        else:
            lines = [line for line in self.tail.splitlines() if line.strip()][-PREVIEW_LINES:]
            # The end of a long line is what the child is writing now, so that end is
            # kept, as much of it as fits on one row once the cell is laid out.
            shown = [
                line if cell_len(line) <= keep else "…" + line_end(line, keep) for line in lines
            ]
        if not self._settled:
            shown += [""] * (self._rows - len(shown))
            self._rows = len(shown)
        body = "".join(f"  │ {line}\n" for line in shown)
        self.update(f"⧉ {self.heading}\n{body}  └ {self.footer}", layout=False)
        # A layout of the screen per update cost more than drawing, with 20 children
        # streaming; rows of one line and a preview that does not shrink keep the height,
        # which is measured only when the rows or the footer changed.
        drawn = (len(shown), self.footer, size)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        lay_out_if_resized(self, size)

    def on_click(self) -> None:
        self.post_message(AgentRow.Selected(self.agent_id))

    def key_enter(self) -> None:
        self.post_message(AgentRow.Selected(self.agent_id))


class Notice(Static):
    def __init__(self, text: str, kind: str = "info") -> None:
        super().__init__(clean_text(text), markup=False, classes=f"notice {kind}")


def welcome(workspace: Path, model: str, mode: str) -> Notice:
    """The one line on a new session's empty first screen: where, with what, how to start."""
    home, shown = Path.home(), str(workspace)
    if workspace.is_relative_to(home):  # as a shell prompt shows it
        shown = "~" + shown[len(str(home)) :]
    return Notice(f"{shown} · {model} · {mode} mode · /help for commands", "welcome")


class Transcript(VerticalScroll):
    """Applies engine events to a conversation on screen: the session's, or one child's.

    It stays scrolled to the end while new cells arrive, unless the user scrolls away.
    Earlier history (a resumed session, a child's conversation so far) is mounted a
    screenful at a time: the newest first, the previous one each time the user scrolls
    near the top.
    """

    def __init__(self, *, id: str = "transcript", keep_line_breaks: bool = False) -> None:
        super().__init__(id=id)
        # Answers show a single newline as a line break, not as Markdown's space.
        self.keep_line_breaks = keep_line_breaks
        self._answer: AssistantMessage | None = None
        self._reasoning: Reasoning | None = None
        self._tools: dict[str, ToolCell] = {}
        self._opening: dict[str, events.ToolCallStarted] = {}
        self._agents: dict[str, AgentCell] = {}
        self._backlog: Backlog | None = None
        # Mounted history cells -> the index of the message each shows (History.origins).
        self._origins: dict[Widget, int] = {}
        self._loading = False
        # The latest output of each running sub-agent whose cell is not drawn with it yet.
        self._tails: dict[AgentCell, str] = {}
        self._previews = Coalescer(self, self._show_tails)

    def watch_virtual_size(self, size: Size) -> None:
        self._anchor_when_full(size.height)

    def on_resize(self) -> None:
        self._anchor_when_full(self.virtual_size.height)

    def _anchor_when_full(self, content_height: int) -> None:
        """Anchored, the view follows new cells (and a Markdown answer growing after its
        mount) to the end; scrolling up releases it, scrolling back down restores it.

        Only while the cells overflow the view: an anchored view taller than its content
        shows the content at the bottom of the screen.
        """
        full = content_height > self.size.height
        if full and not self.is_anchored:
            self.anchor()
        elif not full and self.is_anchored:
            self.anchor(False)
            self.scroll_to(y=0, animate=False, immediate=True)

    async def reset(self) -> None:
        """Empty the transcript and forget its cells, so later events start new ones."""
        self._answer = None
        self._reasoning = None
        self._tools.clear()
        self._opening.clear()
        self._agents.clear()
        self._backlog = None
        self._origins.clear()
        self._tails.clear()
        self.anchor(False)
        await self.remove_children()

    def add(self, widget: Widget) -> AwaitMount:
        return self.add_all([widget])

    def add_all(self, widgets: Iterable[Widget]) -> AwaitMount:
        """Mount in one batch; past MAX_MOUNTED + PRUNE_BATCH cells, drop the oldest.

        The cells are in place at once (Textual adds them to the DOM before it returns),
        so later events find them; awaiting the result waits until they are mounted, which
        only a caller that talks to a cell's own children needs. Waiting for each mount
        in turn spread a fan-out's twenty cells over many frames, each with a layout.
        """
        mounting = self.mount_all(widgets)
        # Not while the user reads further up: the cells would move under their eyes.
        if len(self.children) > MAX_MOUNTED + PRUNE_BATCH and self.scroll_y >= self.max_scroll_y:
            self._prune()
        return mounting

    def _prune(self) -> None:
        """Remove the oldest cells down to MAX_MOUNTED, in one remove.

        History cells go a whole message at a time and can be rebuilt by scrolling up
        again; once a cell of this session's own (which nothing can rebuild) under the
        history goes, the history before it cannot be shown in order and is let go.
        """
        children = list(self.children)
        cut = len(children) - MAX_MOUNTED
        origin = self._origins.get(children[cut - 1])
        while origin is not None and cut < len(children):
            if self._origins.get(children[cut]) != origin:
                break
            cut += 1
        pruned = children[:cut]
        history_seen = lost = False
        for cell in pruned:
            if self._origins.pop(cell, None) is not None:
                history_seen = True
            elif history_seen:
                lost = True
        if self._backlog is not None and history_seen:
            if lost:
                self._backlog = None
            else:
                kept = (self._origins[cell] for cell in children[cut:] if cell in self._origins)
                self._backlog.rewind(next(kept, len(self._backlog.messages)))
        gone = set(pruned)
        self._tools = {key: cell for key, cell in self._tools.items() if cell not in gone}
        self._agents = {key: cell for key, cell in self._agents.items() if cell not in gone}
        self._tails = {cell: tail for cell, tail in self._tails.items() if cell not in gone}
        self.remove_children(pruned)

    async def show_history(self, backlog: Backlog, above: Sequence[Widget] = ()) -> None:
        """Mount `above` and the newest screenful of `backlog`'s cells in one batch.

        Later events finish its open tool calls and update its sub-agent cells.
        """
        self._backlog = backlog
        history = backlog.older(self._batch_rows())
        self._tools.update(history.pending)
        self._agents.update(history.agents)
        self._origins.update(history.origins)
        await self.add_all([*above, *history.widgets])
        self.call_after_refresh(self._fill)

    def has_agent(self, agent_id: str) -> bool:
        """Whether a cell of this sub-agent is on show (its events then update it)."""
        return agent_id in self._agents

    def _batch_rows(self) -> int:
        """A screenful, and a row to scroll up by."""
        return max(self.size.height or self.app.size.height, MIN_BATCH_ROWS) + 1

    def _fill(self) -> None:
        """The cells do not fill the view, so it cannot be scrolled up: load more."""
        if self.max_scroll_y <= 0:
            self._want_older()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        # Within half a screen of the top, the batch before is loaded: scrolling on up
        # usually finds it there already.
        if new < old and new < self.size.height / 2:
            self._want_older()

    def _want_older(self) -> None:
        if self._backlog is not None and not self._backlog.exhausted and not self._loading:
            self._loading = True
            self.call_later(self.load_older)

    async def load_older(self) -> None:
        """Mount the batch before the oldest history cell above it, the view kept in place."""
        try:
            backlog = self._backlog
            if backlog is None or backlog.exhausted:
                return
            history = backlog.older(self._batch_rows())
            for agent_id, agent in history.agents.items():
                self._agents.setdefault(agent_id, agent)  # a newer cell keeps the updates
            oldest = next((cell for cell in self.children if cell in self._origins), None)
            self._origins.update(history.origins)
            at_end = self.scroll_y >= self.max_scroll_y  # anchored: the end stays in view
            # Where the cell at the top of the view is now, to put it back there.
            marker = oldest if oldest is not None else next(iter(self.children), None)
            if marker is None:
                await self.mount_all(history.widgets)
            else:
                offset = marker.virtual_region.y - self.scroll_y
                await self.mount_all(history.widgets, before=marker)
                if not at_end:
                    self.call_after_refresh(self._keep_in_view, marker, offset)
            self.call_after_refresh(self._fill)
        finally:
            self._loading = False

    def _keep_in_view(self, marker: Widget, offset: int) -> None:
        self.scroll_to(y=marker.virtual_region.y - offset, animate=False, immediate=True)

    async def user(
        self, text: str, *, steer: bool = False, pastes: dict[str, str] | None = None
    ) -> None:
        if pastes:  # folded pastes in it: a cell that unfolds them (tui/paste.py)
            from codewhale.tui.paste import PastedMessage

            await self.add(PastedMessage(text, pastes, steer=steer))
            return
        await self.add(UserMessage(text, steer=steer))

    async def notice(self, text: str, kind: str = "info") -> None:
        await self.add(Notice(text, kind))

    def agent_event(self, event: events.AnyAgentEvent, title: str, summary: str = "") -> None:
        """Show a child's lifecycle inline: created on open, fed progress, settled at the end
        (with `summary`, its report's SUMMARY, when it has one)."""
        # Here, not at the top: the event classes load with the session, after the first frame.
        from codewhale.runtime import events

        agent_id = event.agent_id
        cell = self._agents.get(agent_id)
        if cell is None:
            cell = self._agents[agent_id] = AgentCell(agent_id, title)
            self.add(cell)
        if isinstance(event, events.AgentProgress) and event.text_tail:
            # Children stream a dozen tails a second each: drawn a frame at a time.
            self._tails[cell] = event.text_tail
            self._previews.request()
            return
        if (tail := self._tails.pop(cell, None)) is not None:  # in order, before this
            cell.progress(tail)
        match event:
            case events.AgentStarted():
                cell.running("thinking")
            case events.AgentToolStarted():
                cell.running(event.tool)
            case events.AgentFinished():
                detail = "" if event.status == "completed" else event.message
                cell.settle(event.status, detail, summary)
            case (
                events.AgentQueued()
                | events.AgentProgress()
                | events.AgentToolFinished()
                | events.AgentSpawned()
                | events.AgentUsage()
            ):
                pass  # nothing to show beyond the tail drawn above
            case _:
                assert_never(event)

    def _show_tails(self) -> None:
        tails, self._tails = self._tails, {}
        for cell, tail in tails.items():
            cell.progress(tail)

    async def apply(self, event: events.Event) -> None:
        # Here, not at the top: the event classes are the engine's, which the first frame
        # does without (events only come once the session is open).
        from codewhale.runtime import events

        if isinstance(event, events.ReasoningDelta):
            if self._reasoning is None:
                self._reasoning = Reasoning()
                await self.add(self._reasoning)
            self._reasoning.add_fragment(event.text)
        elif isinstance(event, events.AssistantDelta):
            if self._answer is None:
                from codewhale.tui.answer import AssistantMessage

                self._answer = AssistantMessage()
                await self.add(self._answer)
            await self._answer.add_fragment(event.text)
        elif isinstance(event, events.AssistantMessage):
            await self._finish_answer(event)
        elif isinstance(event, events.ToolCallStarted):
            if event.name == AGENT_OPEN:
                # Its sub-agent cell, which comes next, shows it; a tool cell is made only
                # if no child came of it.
                self._opening[event.call_id] = event
            elif event.call_id not in self._tools:  # else rebuilt from history as it ran
                cell = ToolCell(event)
                self._tools[event.call_id] = cell
                self.add(cell)
        elif isinstance(event, events.ToolCallFinished):
            if (opening := self._opening.pop(event.call_id, None)) is not None:
                if not event.ok:
                    refused = ToolCell(opening)
                    refused.finish(event)
                    self.add(refused)
                return
            started = self._tools.pop(event.call_id, None)
            diff = started.finish(event) if started is not None else None
            # Right under its call (parallel calls may have added cells since), unless the
            # call's cell was already dropped past MAX_MOUNTED.
            if diff is not None and started is not None and started.parent is self:
                await self.mount(DiffView(diff), after=started)
        elif isinstance(event, events.SteerAccepted):
            await self.notice(f"steer accepted: {event.text}", "steer")
        elif isinstance(event, events.ErrorEvent):
            await self.notice(event.message, "error")
        elif isinstance(event, events.WarningEvent):
            await self.notice(event.message, "warning")
        elif isinstance(event, events.HookRan):
            await self.notice(event.line(), "info" if event.outcome == "ok" else "warning")
        # /compact says what it did itself; these are the ones a turn did on its own.
        elif isinstance(event, events.ContextCompacted) and event.trigger == "auto":
            await self.notice(
                f"Context compacted: {event.summarised} older messages summarised into one, "
                f"the {event.kept} newest kept as they were; {event.tokens_before:,} → about "
                f"{event.tokens_after:,} tokens of {event.window:,}."
            )
        elif isinstance(event, events.CompactionFailed) and event.trigger == "auto":
            await self.notice(
                f"Could not compact the context ({event.message}); the conversation goes on "
                "as it was.",
                "warning",
            )
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
            from codewhale.tui.answer import AssistantMessage

            await self.add(AssistantMessage(event.content + suffix))
        self._answer = None
        self._reasoning = None
