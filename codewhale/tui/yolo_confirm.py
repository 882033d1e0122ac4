"""Asked before `/mode yolo`: in YOLO nothing asks any more, so entering it is a choice."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class YoloConfirmScreen(ModalScreen[bool]):
    """Dismissed with True to switch to YOLO, False to keep the current mode."""

    DEFAULT_CSS = """
    YoloConfirmScreen { align: center middle; }
    YoloConfirmScreen #yolo-confirm {
        width: 68;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    YoloConfirmScreen #yolo-confirm .title { text-style: bold; margin-bottom: 1; }
    YoloConfirmScreen #yolo-confirm .buttons { height: auto; margin-top: 1; }
    """
    # Switching is what the user typed `/mode yolo` for, so it is under Enter; Esc and n
    # are the way back.
    AUTO_FOCUS = "#yolo"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("y", "answer(True)", "Switch to YOLO"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="yolo-confirm"):
            yield Static("Switch to YOLO mode?", classes="title", markup=False)
            yield Static(
                "Every tool runs without asking: file edits, shell commands and network "
                "access, for this session and its sub-agents (each within its role). "
                "Writes to protected paths (.git, .codewhale, .claude, .mcp.json) still ask.",
                markup=False,
            )
            yield Static(
                f"Leave it any time with /mode agent or Tab (now: {self.current}).",
                markup=False,
            )
            with Horizontal(classes="buttons"):
                yield Button(escape("Switch to YOLO [y]"), id="yolo", variant="error")
                yield Button(escape(f"Keep {self.current} [n]"), id="keep", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yolo")

    def action_answer(self, switch: bool) -> None:
        self.dismiss(switch)
