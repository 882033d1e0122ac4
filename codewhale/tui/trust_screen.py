"""The one-time question about a project's programs (its .mcp.json servers, its hooks):
what they would run, "Trust" or "Not now"; and several such questions asked one after
the other, never two dialogs at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from codewhale.tui.armed import ArmedKeys

if TYPE_CHECKING:
    from textual.app import App


class TrustScreen(ArmedKeys, ModalScreen[bool]):
    """Dismissed with True to trust what `items` describe, False to leave it off."""

    DEFAULT_CSS = """
    TrustScreen { align: center middle; }
    TrustScreen .trust-dialog {
        width: 100;
        max-width: 95%;
        height: auto;
        max-height: 90%;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    TrustScreen .trust-dialog .title { text-style: bold; margin-bottom: 1; }
    TrustScreen .trust-dialog .items { height: auto; max-height: 20; margin-top: 1; }
    TrustScreen .trust-dialog .item { margin-bottom: 1; }
    TrustScreen .trust-dialog .buttons { height: auto; margin-top: 1; }
    """
    # Not running programs is the safe answer, so it is the one under Enter.
    AUTO_FOCUS = ".later"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("t", "answer(True)", "Trust"),
        Binding("n,escape", "answer(False)", "Not now"),
    ]

    def __init__(
        self, *, kind: str, heading: str, paragraphs: list[str], items: list[str], trust_label: str
    ) -> None:
        super().__init__()
        self.kind = kind
        self.heading = heading
        self.paragraphs = paragraphs
        self.items = items
        self.trust_label = trust_label
        # It opens as the session does, often while you are typing: a "t" is not a yes.
        self.arm()

    def compose(self) -> ComposeResult:
        with Vertical(id=f"{self.kind}-trust", classes="trust-dialog"):
            yield Static(self.heading, classes="title", markup=False)
            for paragraph in self.paragraphs:
                yield Static(paragraph, markup=False)
            with VerticalScroll(classes="items"):
                for item in self.items:
                    yield Static(item, classes="item", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(
                    escape(f"{self.trust_label} [t]"),
                    id=f"{self.kind}-trust-yes",
                    classes="yes",
                    variant="warning",
                )
                yield Button(
                    escape("Not now [n]"),
                    id=f"{self.kind}-later",
                    classes="later",
                    variant="primary",
                )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.has_class("yes"))

    def action_answer(self, trusted: bool) -> None:
        if self.armed():
            self.dismiss(trusted)


@dataclass(frozen=True)
class TrustQuestion:
    """A dialog to show and what to do with its answer."""

    screen: TrustScreen
    answered: Callable[[bool], Awaitable[None]]


def ask_in_turn(app: App[Any], questions: Iterable[TrustQuestion | None]) -> None:
    """Show each question once the one before it is answered (None: nothing to ask)."""
    waiting = [question for question in questions if question is not None]
    if not waiting:
        return
    first, rest = waiting[0], waiting[1:]

    async def answered(trusted: bool | None) -> None:
        # The next dialog opens first: the answer's work may take a while (servers start).
        ask_in_turn(app, rest)
        await first.answered(bool(trusted))

    first.screen.arm()  # made with the others, it opens only now
    app.push_screen(first.screen, answered)
