"""The approval modal: who asks, exactly what would run or change, and the three answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from codewhale.sanitize import clean_text
from codewhale.tui.armed import ArmedKeys
from codewhale.tui.diff_view import diff_renderable, looks_like_diff

if TYPE_CHECKING:
    from codewhale.runtime import events

KEYS = "y approve once · a always this session · n / Esc deny · ↑ ↓ scroll"


class ApprovalScreen(ArmedKeys, ModalScreen[str]):
    """Dismissed with 'approve', 'approve_always' or 'deny'."""

    DEFAULT_CSS = """
    ApprovalScreen #approval .what {
        height: auto;
        max-height: 60vh;
        margin-bottom: 1;
    }
    ApprovalScreen #approval .preview { padding: 0 1; }
    ApprovalScreen #approval .buttons { height: auto; }
    ApprovalScreen #approval .keys { color: $text-muted; margin-top: 1; }
    """
    # The command or diff area takes focus, so arrow keys scroll it and no answer button
    # sits under Enter; y, a and n reach the screen's bindings from there.
    AUTO_FOCUS = ".what"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("y", "answer('approve')", "Approve once"),
        Binding("a", "answer('approve_always')", "Always"),
        Binding("n,escape", "answer('deny')", "Deny"),
    ]

    def __init__(self, request: events.ApprovalRequested) -> None:
        super().__init__()
        self.request = request
        self.arm()

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="approval"):
            yield Static(
                f"{asker(request.requester)} asks to run {clean_text(request.tool)}",
                classes="title",
                markup=False,
            )
            with VerticalScroll(classes="what"):
                # Everything the call would run, never cut: approving means approving it all.
                yield Static(
                    Text(clean_text(request.summary or request.arguments)), classes="command"
                )
                if request.preview:
                    preview = clean_text(request.preview)
                    body = diff_renderable(preview) if looks_like_diff(preview) else Text(preview)
                    yield Static(body, classes="preview")
            # The rule "always" stores, read before the choice rather than found out after.
            yield Static(
                f"“Always” allows, for this session: {always_rule(request)}",
                classes="scope",
                markup=False,
            )
            with Horizontal(classes="buttons"):
                # Labels are markup: `[y]` unescaped is read as a tag and disappears.
                yield Button(escape("Approve once [y]"), id="approve", variant="success")
                yield Button(escape("Always this session [a]"), id="approve_always")
                yield Button(escape("Deny [n]"), id="deny", variant="error")
            yield Static(KEYS, classes="keys", markup=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_answer(self, answer: str) -> None:
        if not self.armed():
            return  # typed before the dialog could be read
        self.dismiss(answer)


def asker(requester: str) -> str:
    """`parent` → "The parent"; a child's `nickname (name, type)` → "Sub-agent …"."""
    if requester == "parent":
        return "The parent"
    return f"Sub-agent {clean_text(requester)}"


def always_rule(request: events.ApprovalRequested) -> str:
    """The rule an "always" answer grants, in words (a request built without one: the tool)."""
    return clean_text(request.scope) or f"every {clean_text(request.tool)} call"
