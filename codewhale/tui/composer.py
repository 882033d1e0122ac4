"""The composer: where the user writes prompts, steers a running turn and runs commands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from codewhale.tui.paste import Pastes, folds

if TYPE_CHECKING:
    from codewhale.tui.completion import Completion


class Composer(TextArea):
    """Enter sends (or steers); Shift+Enter / Ctrl+J add a newline; Up recalls history.

    Tab is context dependent and handled by the app: it switches Plan ↔ Agent on an
    empty draft, queues the draft while a turn runs, and completes commands and paths otherwise.
    """

    @dataclass
    class Submitted(Message):
        text: str

    @dataclass
    class TabPressed(Message):
        text: str

    class EscapePressed(Message):
        pass

    def __init__(self) -> None:
        super().__init__(
            "",
            id="composer",
            soft_wrap=True,
            show_line_numbers=False,
            compact=True,
            placeholder="Ask CodeWhale… (/ for commands, @ for files, Tab: Plan ↔ Agent)",
        )
        self.prompt_history: list[str] = []
        self._history_index: int | None = None
        self.pastes = Pastes()
        # Set by the app: the `/` and `@` list, which takes its keys first while open.
        self.completion: Completion | None = None

    async def _on_key(self, event: events.Key) -> None:
        if self.completion is not None and self.completion.take_key(event.key):
            event.prevent_default()
            event.stop()
        elif event.key == "enter":
            event.prevent_default()
            event.stop()
            text = self.text
            if text.strip():
                self.prompt_history.append(text)
                self._history_index = None
                self.clear()
                self.post_message(self.Submitted(text))
        elif event.key in ("shift+enter", "ctrl+j"):
            event.prevent_default()
            event.stop()
            self.insert("\n")
        elif event.key == "tab":
            event.prevent_default()
            event.stop()
            self.post_message(self.TabPressed(self.text))
        elif event.key == "escape":
            event.prevent_default()
            event.stop()
            self.post_message(self.EscapePressed())
        elif event.key == "up" and self.cursor_location[0] == 0 and self.prompt_history:
            event.prevent_default()
            event.stop()
            self._recall(-1)
        elif event.key == "down" and self._history_index is not None:
            event.prevent_default()
            event.stop()
            self._recall(+1)

    async def _on_paste(self, event: events.Paste) -> None:
        # A long paste is kept aside and shows as one token (tui/paste.py); a short one
        # is left to TextArea, which inserts it.
        if not self.read_only and folds(event.text):
            event.prevent_default()
            self.insert(self.pastes.add(event.text))

    def _recall(self, step: int) -> None:
        index = len(self.prompt_history) if self._history_index is None else self._history_index
        index = min(max(index + step, 0), len(self.prompt_history))
        self._history_index = None if index == len(self.prompt_history) else index
        self.text = "" if self._history_index is None else self.prompt_history[index]
        self.move_cursor(self.document.end)
