"""Asked before quitting while sub-agents run: quitting stops them, so it is a choice."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class QuitScreen(ModalScreen[bool]):
    """Dismissed with True to quit, False to stay."""

    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen #quit-confirm {
        width: 64;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    QuitScreen #quit-confirm .title { text-style: bold; margin-bottom: 1; }
    QuitScreen #quit-confirm .buttons { height: auto; margin-top: 1; }
    """
    # Staying is the safe answer, so it is the one under Enter.
    AUTO_FOCUS = "#stay"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("q", "answer(True)", "Quit"),
        Binding("s,escape", "answer(False)", "Stay"),
    ]

    def __init__(self, running: int) -> None:
        super().__init__()
        self.running = running

    def compose(self) -> ComposeResult:
        agents = "1 sub-agent is" if self.running == 1 else f"{self.running} sub-agents are"
        with Vertical(id="quit-confirm"):
            yield Static(f"Quit while {agents} still running?", classes="title", markup=False)
            yield Static(
                "Quitting stops them; they are recorded as interrupted and can be "
                "continued after `codewhale --continue`.",
                markup=False,
            )
            with Horizontal(classes="buttons"):
                yield Button(escape("Quit [q]"), id="quit", variant="error")
                yield Button(escape("Stay [s]"), id="stay", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "quit")

    def action_answer(self, quit_app: bool) -> None:
        self.dismiss(quit_app)
