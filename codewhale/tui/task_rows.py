"""The Work sidebar's Tasks section: one two-line row per background shell task.

Shown only once the session has a task. Line 1: state glyph, command, elapsed time;
line 2: its last line of output and how it ended. Click or Enter opens its screen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from codewhale.tui.sidebar import ROW_WIDTH, elapsed_text, laid_out_size, one_line

if TYPE_CHECKING:
    from codewhale.runtime.background import TaskSnapshot

# A failing exit is red.
STATUS_STYLES = {"running": "cyan", "killed": "yellow", "exit 0": "green"}


def _fit(left: Text, right: str, width: int, right_style: str = "dim") -> Text:
    """`left` cut with an ellipsis where needed, `right` flush with the right edge."""
    line = left.copy()
    room = width - cell_len(right) - (1 if right else 0)
    line.truncate(max(room, 1), overflow="ellipsis")
    if right:
        line.append(" " * max(width - line.cell_len - cell_len(right), 1))
        line.append(right, style=right_style)
    return line


def task_row_text(snapshot: TaskSnapshot, width: int) -> Text:
    """Line 1: glyph, task id, command, elapsed. Line 2: last output line, state."""
    style = STATUS_STYLES.get(snapshot.status, "red")
    head = Text()
    head.append("● " if snapshot.running else "■ ", style=style)
    head.append(snapshot.task_id, style="bold")
    head.append(f" {one_line(snapshot.command)}")
    detail = Text("  ")
    detail.append(one_line(snapshot.last_line) or "(no output yet)", style="dim")
    lines = Text("\n").join(
        [
            _fit(head, elapsed_text(snapshot.elapsed_ms), width),
            _fit(detail, snapshot.status, width, style),
        ]
    )
    lines.no_wrap = True
    return lines


class TaskRow(Static, can_focus=True):
    """One background task; click or Enter opens its screen."""

    @dataclass
    class Selected(Message):
        task_id: str

    def __init__(self, snapshot: TaskSnapshot) -> None:
        super().__init__(id=f"task-{snapshot.task_id}", classes="task-row", markup=False)
        self.task_id = snapshot.task_id
        self.snapshot = snapshot

    def show(self, snapshot: TaskSnapshot) -> None:
        self.snapshot = snapshot
        self.paint()

    def on_mount(self) -> None:
        self.paint()

    def on_resize(self) -> None:
        self.paint()

    def paint(self) -> None:
        width = laid_out_size(self).width or ROW_WIDTH  # 0: not laid out yet
        tooltip = Text(f"{one_line(self.snapshot.command)}\n{self.snapshot.status}")
        if tooltip != self.tooltip:
            self.tooltip = tooltip
        text = task_row_text(self.snapshot, width)
        # Read once a second while it runs: drawn again only when what it shows changed.
        if text != self.content:
            self.update(text, layout=False)

    def on_click(self) -> None:
        self.post_message(self.Selected(self.task_id))

    def key_enter(self) -> None:
        self.post_message(self.Selected(self.task_id))


class TasksSection(Vertical):
    """The title and the rows; hidden while the session has no background task."""

    DEFAULT_CSS = """
    TasksSection { height: auto; }
    TasksSection .task-row { height: 2; }
    TasksSection .task-row:focus { background: $boost; }
    """

    def __init__(self) -> None:
        super().__init__(id="tasks")
        self.title = Static("Tasks", classes="section-title", markup=False)
        self.rows: dict[str, TaskRow] = {}
        self.display = False
        # The session's tasks as they are now (set by the app from the session it opens):
        # read on each tick while one runs, for its elapsed time and last line of output.
        self.source: Callable[[], list[TaskSnapshot]] = list

    def compose(self):
        yield self.title

    def show_tasks(self, snapshots: list[TaskSnapshot]) -> None:
        """Every task of the session, in the order started: rows added, updated or dropped."""
        wanted = {snapshot.task_id for snapshot in snapshots}
        for task_id in [task_id for task_id in self.rows if task_id not in wanted]:
            self.rows.pop(task_id).remove()
        for snapshot in snapshots:
            row = self.rows.get(snapshot.task_id)
            if row is None:
                self.rows[snapshot.task_id] = row = TaskRow(snapshot)
                self.mount(row)
            else:
                row.show(snapshot)
        running = sum(snapshot.running for snapshot in snapshots)
        self.title.update(f"Tasks: {len(snapshots)} ({running} running)")
        self.display = bool(snapshots)

    def tick(self) -> None:
        """Once a second (the sidebar's timer): running tasks read again."""
        if any(row.snapshot.running for row in self.rows.values()):
            self.show_tasks(self.source())
