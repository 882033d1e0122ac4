"""Asked before `/mode yolo`: in YOLO nothing asks any more, so entering it is a choice."""

from __future__ import annotations

from textual.binding import Binding

from codewhale.tui.confirm import ConfirmScreen


class YoloConfirmScreen(ConfirmScreen):
    """Dismissed with True to switch to YOLO, False to keep the current mode."""

    DEFAULT_CSS = """
    YoloConfirmScreen #yolo-confirm { width: 68; border: thick $error; }
    """
    # Switching is what the user typed `/mode yolo` for, so it is under Enter; Esc and n
    # are the way back.
    AUTO_FOCUS = "#yolo"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("y", "answer(True)", "Switch to YOLO"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__(
            "yolo-confirm",
            "Switch to YOLO mode?",
            [
                "Every tool runs without asking: file edits, shell commands and network "
                "access, for this session and its sub-agents (each within its role). "
                "Writes to protected paths (.git, .codewhale, .claude, .mcp.json) still ask.",
                f"Leave it any time with /mode agent or Tab (now: {current}).",
            ],
            yes=("yolo", "Switch to YOLO [y]"),
            no=("keep", f"Keep {current} [n]"),
        )
