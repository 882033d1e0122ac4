"""Asked before quitting while sub-agents or background tasks run: quitting stops them,
so it is a choice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.binding import Binding

from codewhale.tui.confirm import ConfirmScreen
from codewhale.tui.sidebar import one_line, plural, squeeze

if TYPE_CHECKING:
    from codewhale.runtime.background import TaskSnapshot

# A listed task's line, in the box's 64 cells (its border and padding taken off).
TASK_LINE = 56


class QuitScreen(ConfirmScreen):
    """Dismissed with True to quit, False to stay."""

    DEFAULT_CSS = """
    QuitScreen #quit-confirm { width: 64; border: thick $warning; }
    """
    # Staying is the safe answer, so it is the one under Enter.
    AUTO_FOCUS = "#stay"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("q", "answer(True)", "Quit"),
        Binding("s,escape", "answer(False)", "Stay"),
    ]

    def __init__(self, running: int, tasks: Sequence[TaskSnapshot] = ()) -> None:
        """`running`: sub-agents still running; `tasks`: background tasks still running."""
        what = []
        lines = []
        if running:
            what.append(plural(running, "sub-agent"))
            lines.append(
                "Quitting stops them; they are recorded as interrupted and can be "
                "continued after `codewhale --continue`."
            )
        if tasks:
            what.append(plural(len(tasks), "background task"))
            lines.append("Quitting stops these background tasks:")
            lines += [squeeze(f"  {t.task_id}  {one_line(t.command)}", TASK_LINE) for t in tasks]
        verb = "is" if running + len(tasks) == 1 else "are"
        super().__init__(
            "quit-confirm",
            f"Quit while {' and '.join(what)} {verb} still running?",
            lines,
            yes=("quit", "Quit [q]"),
            no=("stay", "Stay [s]"),
        )
