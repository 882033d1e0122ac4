"""The Work sidebar: checklist, plan, RLM sessions, background tasks (task_rows.py) and one
two-line row per sub-agent.

Rows are ordered running → waiting → finished (most recent first) and moved, never
rebuilt; finished rows fade, then fold into one "N done" line that Enter or a click opens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from itertools import count
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from codewhale.providers.pricing import format_cost
from codewhale.sanitize import clean_text
from codewhale.tui.status import Coalescer

if TYPE_CHECKING:
    # Typing only: the first frame has no rows, and the snapshot's module brings the
    # sub-agents' records and events with it (tests/unit/test_startup.py).
    from codewhale.runtime import RlmSummary
    from codewhale.runtime.events import AgentSnapshot

# A finished row dims this long after it finished...
FADE_AFTER_SECS = 60.0
# ...and folds into the "N done" line after this long,
COLLAPSE_AFTER_SECS = 600.0
# or sooner, once this many more recently finished rows are showing.
KEEP_FINISHED = 5
# The sidebar's one timer: running rows' elapsed time, and fading/folding by age.
TICK_SECS = 1.0
# A row's text width until it has been laid out (the sidebar's content width).
ROW_WIDTH = 35
# A running child quiet this long (no stream delta, no tool starting or ending) says so:
# the API timeout or the heartbeat ends it minutes later, and until then its clock alone
# looked like progress.
QUIET_AFTER_SECS = 15.0

GLYPHS = {
    "pending": "◌",
    "running": "●",
    "completed": "✓",
    "failed": "✗",
    "cancelled": "⊘",
    "interrupted": "⏸",
}
WAITING_LABELS = {"queued": "queued", "waiting_for_user": "waiting for you"}
CONTINUABLE = "continuable: Enter, then Continue"


def wall_clock() -> float:
    """Seconds since the epoch, as records stamp `finished_at_ms`; tests move it forward."""
    return time.time()


class Group(IntEnum):
    """Where a row sorts: running children first, then waiting ones, then finished ones."""

    RUNNING = 0
    WAITING = 1
    FINISHED = 2


def group_of(snapshot: AgentSnapshot) -> Group:
    if snapshot.terminal:
        return Group.FINISHED
    if snapshot.status == "pending" or snapshot.worker_status in WAITING_LABELS:
        return Group.WAITING
    return Group.RUNNING


def role_color(snapshot: AgentSnapshot) -> str:
    """The agent definition's colour when it has one, else its role's."""
    # The role table loads with the first row, not with the first frame.
    from codewhale.subagents.roles import UI_COLORS, lookup_role

    role = lookup_role(snapshot.role)
    return snapshot.color or (UI_COLORS.get(role, "white") if role else "white")


def one_line(text: str) -> str:
    return " ".join(clean_text(text).split())


def tokens_text(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def elapsed_text(ms: int) -> str:
    seconds = max(0, ms) // 1000
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def plural(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def counts_text(snapshot: AgentSnapshot, cost: float | None = None) -> str:
    """Steps (model responses), tool calls, tokens and cost; empty before the first response.

    Tokens and cost a budget limits read "used/limit" (`3.1k/50.0k`, `$0.01/$0.20`)."""
    if not (snapshot.steps_taken or snapshot.tool_calls or snapshot.tokens):
        return ""
    parts = [plural(snapshot.steps_taken, "step"), plural(snapshot.tool_calls, "tool")]
    budget = snapshot.budget
    if budget.max_tokens is not None:
        parts.append(f"{tokens_text(snapshot.budget_tokens)}/{tokens_text(budget.max_tokens)}")
    elif snapshot.tokens:
        parts.append(tokens_text(snapshot.tokens))
    if budget.max_cost_usd is not None:
        parts.append(f"{format_cost(cost) or '?'}/{format_cost(budget.max_cost_usd)}")
    elif snapshot.tokens and cost is not None:  # unknown without a price, or an earlier run's
        parts.append(format_cost(cost))
    return " ".join(parts)


def runtime_text(snapshot: AgentSnapshot, elapsed_ms: int) -> str:
    """Its elapsed time, "used/limit" (`12s/2m00s`) when a budget limits it."""
    if (secs := snapshot.budget.max_runtime_secs) is None:
        return elapsed_text(elapsed_ms)
    return f"{elapsed_text(elapsed_ms)}/{elapsed_text(int(secs * 1000))}"


def budget_text(snapshot: AgentSnapshot, elapsed_ms: int, cost: float | None = None) -> str:
    """`budget 12s/2m00s · 3.1k/50.0k tok · $0.01/$0.20`; empty when no budget is set."""
    budget, parts = snapshot.budget, []
    if budget.max_runtime_secs is not None:
        parts.append(runtime_text(snapshot, elapsed_ms))
    if budget.max_tokens is not None:
        used = tokens_text(snapshot.budget_tokens)
        parts.append(f"{used}/{tokens_text(budget.max_tokens)} tok")
    if budget.max_cost_usd is not None:
        # "?": no price is known for its model, so what it spent cannot be counted.
        parts.append(f"{format_cost(cost) or '?'}/{format_cost(budget.max_cost_usd)}")
    return "budget " + " · ".join(parts) if parts else ""


def runs_text(snapshot: AgentSnapshot) -> str:
    """`run 2` once a message revived the child; empty for its first run."""
    return f"run {snapshot.runs}" if snapshot.runs > 1 else ""


def squeeze(text: str, width: int) -> str:
    """`text` in `width` cells, cut in the middle: model names differ at their ends."""
    if cell_len(text) <= width:
        return text
    if width < 3:
        return "…"[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return f"{text[:head]}…{text[-tail:]}"


def _fit(left: Text, right: str, width: int) -> Text:
    """`left`, cut with an ellipsis where needed, and `right` flush with the right edge."""
    line = left.copy()
    line.truncate(max(_room(right, width), 1), overflow="ellipsis")
    if right:
        line.append(" " * (width - line.cell_len - cell_len(right)))
        line.append(right, style="dim")
    return line


def _room(right: str, width: int) -> int:
    """The cells left of `right` (and the space before it)."""
    return width - cell_len(right) - (1 if right else 0)


@dataclass
class Lookups:
    """What a row asks the session about its child when painted, beyond its snapshot."""

    # When the child last streamed or ran a tool (wall clock); None: not expected to.
    last_output: Callable[[str], float | None] = lambda agent_id: None
    # What it (and its own children) cost so far; None: unknown.
    cost: Callable[[str], float | None] = lambda agent_id: None
    quiet_after_secs: float = QUIET_AFTER_SECS

    def quiet_ms(self, agent_id: str, now: float) -> int | None:
        """How long a running child has been quiet, once that is worth saying."""
        at = self.last_output(agent_id)
        if at is None or now - at < self.quiet_after_secs:
            return None
        return int((now - at) * 1000)


def row_text(
    snapshot: AgentSnapshot,
    elapsed_ms: int,
    width: int,
    quiet_ms: int | None = None,
    cost: float | None = None,
) -> Text:
    """Line 1: glyph, nickname, task title, elapsed. Line 2: model (or why it waits, or
    how long it has been quiet), counts."""
    color = role_color(snapshot)
    head = Text()
    head.append(f"{GLYPHS.get(snapshot.status, '?')} ", style=color)
    head.append(one_line(snapshot.nickname), style=color)
    head.stylize("bold", 2)
    head.append(f" {one_line(snapshot.description)}")
    elapsed = "" if snapshot.status == "pending" else runtime_text(snapshot, elapsed_ms)
    if runs := runs_text(snapshot):
        elapsed = f"{runs} · {elapsed}" if elapsed else runs
    counts = "" if snapshot.continuable else counts_text(snapshot, cost)
    detail = Text("  ")
    waiting = WAITING_LABELS.get(snapshot.worker_status)
    if snapshot.continuable:  # what to do next matters more here than what it did
        detail.append(CONTINUABLE, style="yellow")
    elif quiet_ms is not None:  # a stall on its way to the heartbeat's timeout
        detail.append(f"no output for {elapsed_text(quiet_ms)}", style="yellow")
    else:
        if waiting is not None and not snapshot.terminal:
            detail.append(f"{waiting} ", style="yellow")
        room = _room(counts, width) - detail.cell_len
        detail.append(squeeze(one_line(snapshot.model), max(room, 0)), style="dim")
    lines = Text("\n").join([_fit(head, elapsed, width), _fit(detail, counts, width)])
    lines.no_wrap = True
    return lines


def row_tooltip(snapshot: AgentSnapshot, elapsed_ms: int, cost: float | None = None) -> Text:
    """Everything the row abbreviates, spelled out."""
    state = snapshot.status
    if snapshot.activity and not snapshot.terminal:
        state = f"{state} · {one_line(snapshot.activity)}"
    if runs := runs_text(snapshot):
        state = f"{state} · {runs}"
    lines = [
        one_line(snapshot.description),
        f"{one_line(snapshot.nickname)} ({one_line(snapshot.name)}) · {one_line(snapshot.type)}",
        f"model {one_line(snapshot.model)}",
        state,
        f"{plural(snapshot.steps_taken, 'step')} · "
        f"{plural(snapshot.tool_calls, 'tool call')} · "
        f"{snapshot.tokens:,} tokens · {elapsed_text(elapsed_ms)}",
    ]
    if budget := budget_text(snapshot, elapsed_ms, cost):
        lines.append(budget)
    return Text("\n".join(lines))


def in_order(rows: list[AgentRow], place: dict[AgentRow, int]) -> set[AgentRow]:
    """The longest run of `rows` (not necessarily adjacent) already in `place` order."""
    length = [1] * len(rows)  # of the longest such run ending at rows[i]...
    before = [-1] * len(rows)  # ...and the row before rows[i] in it
    for i, row in enumerate(rows):
        for j in range(i):
            if place[rows[j]] < place[row] and length[j] >= length[i]:
                length[i], before[i] = length[j] + 1, j
    kept: set[AgentRow] = set()
    end = max(range(len(rows)), key=length.__getitem__, default=-1)
    while end >= 0:
        kept.add(rows[end])
        end = before[end]
    return kept


def laid_out_size(widget: Widget) -> Size:
    """`widget.content_size` as of the last layout, without asking the compositor where
    the widget is: for a widget out of view (most sub-agent cells, with 20 children) that
    question mapped the whole screen again, once per frame in which one was updated."""
    width, height = widget.outer_size
    gutter = widget.styles.gutter
    return Size(max(width - gutter.width, 0), max(height - gutter.height, 0))


def lay_out_if_resized(widget: Widget, size: Size) -> None:
    """Have the screen laid out again only if `widget`'s content, drawn at `size` (its
    `laid_out_size`), takes another height, or it was never laid out; otherwise the
    repaint its update asked for is all it needs."""
    if not size.width or widget.get_content_height(size, size, size.width) != size.height:
        widget.refresh(layout=True)


class AgentRow(Static, can_focus=True):
    """One child; click or Enter opens its agent screen."""

    @dataclass
    class Selected(Message):
        agent_id: str

    def __init__(self, snapshot: AgentSnapshot, arrival: int, lookups: Lookups) -> None:
        super().__init__(id=f"row-{snapshot.agent_id}", classes="agent-row", markup=False)
        self.agent_id = snapshot.agent_id
        self.lookups = lookups
        self.arrival = arrival  # first seen: the order within the running and waiting groups
        self.snapshot = snapshot
        self.received = wall_clock()  # when `snapshot` came: a running child's time counts on
        self._times_shown: tuple[str, str] = ("", "")  # elapsed, and quiet for
        self.paint(self.received)

    @property
    def group(self) -> Group:
        return group_of(self.snapshot)

    @property
    def finished_at(self) -> float:
        return (self.snapshot.finished_at_ms or 0) / 1000

    def sort_key(self) -> tuple[int, float, int]:
        if self.group is Group.FINISHED:
            return (Group.FINISHED, -self.finished_at, self.arrival)
        return (self.group, 0.0, self.arrival)

    def elapsed_ms(self, now: float) -> int:
        """The snapshot's elapsed time, plus the time since it arrived while the child runs."""
        since = int((now - self.received) * 1000) if self.snapshot.status == "running" else 0
        return self.snapshot.elapsed_ms + max(0, since)

    def show(self, snapshot: AgentSnapshot) -> None:
        self.take(snapshot)
        self.paint(self.received)

    def take(self, snapshot: AgentSnapshot) -> None:
        """Keep `snapshot` (where the row sorts, what it counts) to be painted later."""
        self.snapshot = snapshot
        self.received = wall_clock()

    def quiet_ms(self, now: float) -> int | None:
        if self.snapshot.status != "running":
            return None
        return self.lookups.quiet_ms(self.agent_id, now)

    @staticmethod
    def _times(elapsed_ms: int, quiet_ms: int | None) -> tuple[str, str]:
        return elapsed_text(elapsed_ms), "" if quiet_ms is None else elapsed_text(quiet_ms)

    def tick(self, now: float) -> None:
        """Redraw when the shown elapsed or quiet time changed."""
        if self._times(self.elapsed_ms(now), self.quiet_ms(now)) != self._times_shown:
            self.paint(now)

    def on_resize(self) -> None:
        self.paint(wall_clock())

    def paint(self, now: float) -> None:
        elapsed = self.elapsed_ms(now)
        quiet = self.quiet_ms(now)
        self._times_shown = self._times(elapsed, quiet)
        cost = self.lookups.cost(self.agent_id)
        tooltip = row_tooltip(self.snapshot, elapsed, cost)
        if tooltip != self.tooltip:
            self.tooltip = tooltip
        width = laid_out_size(self).width or ROW_WIDTH  # 0: not laid out yet
        text = row_text(self.snapshot, elapsed, width, quiet, cost)
        # Most events change nothing the row shows (a child's stream moves on, its counts
        # change at the end of a step): only a changed row is drawn again. Two lines
        # whatever they say (`.agent-row` height): no layout pass needed.
        if text != self.content:
            self.update(text, layout=False)

    def on_click(self) -> None:
        self.post_message(self.Selected(self.agent_id))

    def key_enter(self) -> None:
        self.post_message(self.Selected(self.agent_id))


class DoneLine(Static, can_focus=True):
    """The folded finished rows as one line; click or Enter shows or hides them."""

    class Toggled(Message):
        pass

    def __init__(self) -> None:
        super().__init__("", id="done-line", markup=False)
        self.display = False
        self._shown: tuple[int, bool] | None = None

    def show_count(self, folded: int, expanded: bool) -> None:
        if (folded, expanded) == self._shown:  # asked on every mailbox event
            return
        self._shown = (folded, expanded)
        self.display = folded > 0
        if expanded:
            self.update(Text.assemble(f"▾ {folded} done", ("  Enter hides", "dim")))
        else:
            self.update(Text.assemble(f"▸ {folded} done", ("  Enter shows", "dim")))

    def on_click(self) -> None:
        self.post_message(self.Toggled())

    def key_enter(self) -> None:
        self.post_message(self.Toggled())


class WorkSidebar(VerticalScroll):
    """Reads snapshots; never blocks the engine; updates the one row an event is about."""

    def __init__(self) -> None:
        super().__init__(id="work")
        self.border_title = "Work"
        # Empty sections say "—"; on a narrow terminal they step aside for the rows.
        self.checklist_title = Static("Checklist", classes="section-title empty")
        self.checklist = Static("—", classes="section empty", markup=False)
        self.plan_title = Static("Plan", classes="section-title empty")
        self.plan = Static("—", classes="section empty", markup=False)
        self.rlm_title = Static("RLM sessions", classes="section-title empty")
        self.rlm = Static("—", classes="section empty", markup=False)
        # Imported here: its rows use this module's helpers.
        from codewhale.tui.task_rows import TasksSection

        self.tasks = TasksSection()  # shown once the session has a background task
        self._agents_heading = "Sub-agents: none"
        self.agents_title = Static(self._agents_heading, classes="section-title")
        self.agent_rows = Vertical(id="agent-rows")
        self.done_line = DoneLine()
        self.expanded = False  # the user opened the "N done" line
        self._rows: dict[str, AgentRow] = {}
        self._arrivals = count()
        # Filled in by the app from the session it opens.
        self.lookups = Lookups()
        # Rows whose snapshot changed since they were painted: painted at most once a frame.
        self._unpainted: dict[str, AgentRow] = {}
        self._painter = Coalescer(self, self._paint_rows)

    def compose(self):
        yield self.checklist_title
        yield self.checklist
        yield self.plan_title
        yield self.plan
        yield self.rlm_title
        yield self.rlm
        yield self.tasks
        yield self.agents_title
        yield self.agent_rows
        yield self.done_line

    def on_mount(self) -> None:
        self.set_interval(TICK_SECS, self.tick)

    @staticmethod
    def _fill(title: Static, body: Static, lines: list[str]) -> None:
        body.update("\n".join(lines) or "—")
        for widget in (title, body):
            widget.set_class(not lines, "empty")

    def show_work(self, work: dict) -> None:
        items = work.get("checklist", [])
        marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
        lines = [f"{work.get('percent_complete', 0)}% complete"] if items else []
        lines += [f"{marks[i['status']]} {clean_text(i['text'])}" for i in items]
        self._fill(self.checklist_title, self.checklist, lines)
        steps = [f"{marks[s['status']]} {clean_text(s['text'])}" for s in work.get("plan", [])]
        self._fill(self.plan_title, self.plan, steps)

    def show_rlm(self, sessions: list[RlmSummary]) -> None:
        lines = [
            f"{s.name}  {s.context_chars:,} chars · {s.evals} evals · {s.calls} calls"
            for s in sessions
        ]
        self._fill(self.rlm_title, self.rlm, lines)

    def show_agent(self, snapshot: AgentSnapshot) -> None:
        """Called once per mailbox event: updates that child's row and moves it if it must.

        A row that changes group is moved and painted at once; other changes (20 streaming
        children send hundreds of events a second) are painted at most once a frame.
        """
        row = self._rows.get(snapshot.agent_id)
        if row is None:
            row = AgentRow(snapshot, next(self._arrivals), self.lookups)
            self._rows[snapshot.agent_id] = row
            # Not waited for: it is in place at once, and twenty opened together are
            # mounted and laid out together (see Transcript.add_all).
            self.agent_rows.mount(row)
            moved = True
        else:
            placed = row.sort_key()
            row.take(snapshot)
            moved = row.sort_key() != placed  # most events leave it where it sorts
            if moved:  # it started, waits or ended: shown at once
                self._unpainted.pop(snapshot.agent_id, None)
                row.paint(row.received)
            else:
                self._unpainted[snapshot.agent_id] = row
                self._painter.request()
        if moved:
            self._arrange()
        self._fold(wall_clock())
        title = f"Sub-agents: {len(self._rows)} ({self.count(Group.RUNNING)} running)"
        if title != self._agents_heading:
            self._agents_heading = title
            # One row at any count (35 cells hold "Sub-agents: 999 (999 running)"), so
            # with no layout pass: the counts change with every child that starts or ends.
            self.agents_title.update(title, layout=False)

    def _paint_rows(self) -> None:
        now = wall_clock()
        rows, self._unpainted = self._unpainted, {}
        for row in rows.values():
            row.paint(now)

    def count(self, group: Group) -> int:
        return sum(row.group is group for row in self._rows.values())

    def child_counts(self) -> tuple[int, int]:
        """(running, waiting): what the status line says while the sidebar is hidden."""
        return self.count(Group.RUNNING), self.count(Group.WAITING)

    def tick(self) -> None:
        """Once a second: running rows' (and tasks') elapsed time, and finished rows fading
        and folding."""
        now = wall_clock()
        for row in self._rows.values():
            if row.snapshot.status == "running":
                row.tick(now)
        self.tasks.tick()
        self._fold(now)

    def _arrange(self) -> None:
        """Move the rows that are out of place; the others stay where they are.

        The rows left alone are the longest run already in order, so a row that changes
        group is one move (moving rows one index at a time took up to one per row).
        """
        wanted = sorted(self._rows.values(), key=AgentRow.sort_key)
        children = [row for row in self.agent_rows.children if isinstance(row, AgentRow)]
        if children == wanted:
            return
        place = {row: index for index, row in enumerate(wanted)}
        staying = in_order(children, place)
        for index, row in enumerate(wanted):
            if row in staying:
                continue
            if index == 0:
                self.agent_rows.move_child(row, before=0)
            else:
                self.agent_rows.move_child(row, after=wanted[index - 1])

    def _fold(self, now: float) -> None:
        """Fade finished rows with age; fold the old ones and those past KEEP_FINISHED.

        A continuable row waits for the user's Continue, so it neither fades nor folds.
        """
        finished = sorted(
            (row for row in self._rows.values() if row.group is Group.FINISHED),
            key=AgentRow.sort_key,
        )
        shown = folded = 0
        for row in finished:  # most recent first
            age = now - row.finished_at
            keep = row.snapshot.continuable
            foldable = not keep and (shown >= KEEP_FINISHED or age >= COLLAPSE_AFTER_SECS)
            row.set_class(not keep and age >= FADE_AFTER_SECS, "faded")
            row.set_class(foldable and not self.expanded, "folded")
            if foldable:
                folded += 1
            elif not keep:
                shown += 1
        self.done_line.show_count(folded, self.expanded)

    def on_done_line_toggled(self, message: DoneLine.Toggled) -> None:
        message.stop()
        self.expanded = not self.expanded
        self._fold(wall_clock())
