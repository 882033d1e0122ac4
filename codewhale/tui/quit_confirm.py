"""Asked before quitting while sub-agents run: quitting stops them, so it is a choice."""

from __future__ import annotations

from textual.binding import Binding

from codewhale.tui.confirm import ConfirmScreen


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

    def __init__(self, running: int) -> None:
        agents = "1 sub-agent is" if running == 1 else f"{running} sub-agents are"
        super().__init__(
            "quit-confirm",
            f"Quit while {agents} still running?",
            [
                "Quitting stops them; they are recorded as interrupted and can be "
                "continued after `codewhale --continue`."
            ],
            yes=("quit", "Quit [q]"),
            no=("stay", "Stay [s]"),
        )
