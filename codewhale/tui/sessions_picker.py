"""Pick a saved session to resume."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from codewhale.sanitize import clean_text
from codewhale.sessions.store import SessionInfo


class SessionPicker(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]  # noqa: RUF012

    def __init__(self, sessions: list[SessionInfo]) -> None:
        super().__init__()
        self.sessions = sessions

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static("Resume a session (Enter), Esc to cancel", classes="title")
            yield OptionList(
                *(
                    Option(
                        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(s.created_at))}  "
                        f"{clean_text(s.title).replace(chr(10), ' ')[:70]}",
                        id=s.id,
                    )
                    for s in self.sessions
                )
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
