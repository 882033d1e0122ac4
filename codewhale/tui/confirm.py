"""A yes-or-no question in a box over the screen: the shape of the app's confirmations."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Dismissed with True for the `yes` button (or its key), False for `no`.

    Subclasses bind their keys to `answer(True)` / `answer(False)`, set AUTO_FOCUS to the
    button Enter should press, and style `#<box_id>` (width, border).
    """

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen .confirm-box { height: auto; background: $surface; padding: 1 2; }
    ConfirmScreen .confirm-box .title { text-style: bold; margin-bottom: 1; }
    ConfirmScreen .confirm-box .buttons { height: auto; margin-top: 1; }
    """

    def __init__(
        self,
        box_id: str,
        title: str,
        lines: list[str],
        yes: tuple[str, str],
        no: tuple[str, str],
    ) -> None:
        """`yes` and `no` are (button id, label); the text is shown as written, no markup."""
        super().__init__()
        self._box_id, self._title, self._lines = box_id, title, lines
        self._yes, self._no = yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id=self._box_id, classes="confirm-box"):
            yield Static(self._title, classes="title", markup=False)
            for line in self._lines:
                yield Static(line, markup=False)
            with Horizontal(classes="buttons"):
                yield Button(escape(self._yes[1]), id=self._yes[0], variant="error")
                yield Button(escape(self._no[1]), id=self._no[0], variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == self._yes[0])

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
