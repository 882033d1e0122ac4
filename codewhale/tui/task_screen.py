"""One background shell task up close: its command, its live output and how it ended;
`k` stops it (after asking).

The screen reads the task through the Runtime (`background_output` from the offset it
has shown): a few times a second while the task runs, once more when it ends.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Log, Static

from codewhale.runtime import Runtime, RuntimeRequestError
from codewhale.runtime.background import TaskSnapshot
from codewhale.sanitize import clean_text
from codewhale.tui.confirm import ConfirmScreen
from codewhale.tui.sidebar import elapsed_text, one_line

# How often new output is looked for while the task runs.
POLL_SECS = 0.2
# Lines the screen keeps (the task keeps its last MiB; `shell_output` reads all of it).
MAX_LINES = 5000


def header_text(snapshot: TaskSnapshot) -> str:
    return (
        f"{snapshot.task_id} · {snapshot.status} · {elapsed_text(snapshot.elapsed_ms)} · "
        f"{one_line(snapshot.command)}"
    )


class KillTaskScreen(ConfirmScreen):
    """Asked before a task is stopped: a dev server or a long test run is lost with it."""

    DEFAULT_CSS = """
    KillTaskScreen #kill-confirm { width: 64; border: thick $warning; }
    """
    AUTO_FOCUS = "#keep"  # keeping it is the safe answer, under Enter
    BINDINGS: ClassVar = [
        Binding("k", "answer(True)", "Kill"),
        Binding("s,escape", "answer(False)", "Keep"),
    ]

    def __init__(self, snapshot: TaskSnapshot) -> None:
        super().__init__(
            "kill-confirm",
            f"Kill {snapshot.task_id}?",
            [one_line(snapshot.command), "Its whole process group is stopped."],
            yes=("kill", "Kill [k]"),
            no=("keep", "Keep running [s]"),
        )


class TaskScreen(Screen[None]):
    BINDINGS: ClassVar = [
        Binding("escape", "back", "Back"),
        Binding("k", "kill", "Kill task"),
    ]
    DEFAULT_CSS = """
    TaskScreen #task-header { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    TaskScreen #task-output { height: 1fr; padding: 0 1; }
    """

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.header = Static("", id="task-header", markup=False)
        self.output = Log(id="task-output", max_lines=MAX_LINES)
        self.snapshot: TaskSnapshot | None = None
        self._offset = 0
        self._poll: Timer | None = None

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.output
        yield Footer()

    @property
    def runtime(self) -> Runtime | None:
        return getattr(self.app, "runtime", None)

    def on_mount(self) -> None:
        self.read_on()
        if self.snapshot is not None and self.snapshot.running:
            self._poll = self.set_interval(POLL_SECS, self.read_on)
        self.output.focus()

    def read_on(self) -> None:
        """Show what the task printed since the last read, and its state; stop looking
        once it has ended and all of its output is shown."""
        runtime = self.runtime
        if runtime is None:
            return
        try:
            read = runtime.background_output(self.task_id, self._offset)
        except RuntimeRequestError as error:
            self.header.update(clean_text(str(error)))
            return
        self._offset = read.offset
        self.snapshot = read.snapshot
        if read.text:
            self.output.write(clean_text(read.text))
        self.header.update(header_text(read.snapshot))
        if not read.snapshot.running and self._poll is not None:
            self._poll.stop()
            self._poll = None

    def action_back(self) -> None:
        self.dismiss(None)

    def action_kill(self) -> None:
        snapshot = self.snapshot
        if snapshot is None or not snapshot.running:
            self.notify(f"{self.task_id} is not running", severity="warning")
            return

        async def answered(kill: bool | None) -> None:
            runtime = self.runtime
            if not kill or runtime is None:
                return
            try:
                await runtime.kill_background(self.task_id)
            except RuntimeRequestError as error:
                self.notify(clean_text(str(error)), severity="error")
            self.read_on()

        self.app.push_screen(KillTaskScreen(snapshot), answered)
