"""The approval modal: who asks, what it will run, and the three answers."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from codewhale.runtime import events
from codewhale.sanitize import clean_text


class ApprovalScreen(ModalScreen[str]):
    """Dismissed with 'approve', 'approve_always' or 'deny'."""

    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("y", "answer('approve')", "Approve once"),
        Binding("a", "answer('approve_always')", "Always"),
        Binding("n,escape", "answer('deny')", "Deny"),
    ]

    def __init__(self, request: events.ApprovalRequested) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="approval"):
            yield Static(
                f"{clean_text(request.requester)} asks to run {request.tool}",
                classes="title",
                markup=False,
            )
            yield Static(
                clean_text(request.summary or request.arguments)[:2000],
                classes="command",
                markup=False,
            )
            yield Static(
                f"“Always” allows {_scope_text(request.scope or request.tool)} for this session.",
                classes="scope",
                markup=False,
            )
            with Horizontal(classes="buttons"):
                yield Button("Approve once [y]", id="approve", variant="success")
                yield Button("Always this session [a]", id="approve_always")
                yield Button("Deny [n]", id="deny", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)


def _scope_text(scope: str) -> str:
    """`exec_shell:git status` → "`git status` commands"; an exact scope is this command only."""
    tool, _, detail = scope.partition(":")
    if not detail:
        return f"every {tool} call"
    if detail.startswith("="):
        return "this exact command" if tool == "exec_shell" else "this exact call"
    if tool == "fetch_url":
        return f"fetching from {clean_text(detail)}"
    if tool == "rlm_eval":
        return f"running code in RLM session `{clean_text(detail)}`"
    return f"`{clean_text(detail)}` commands"
