"""The approval modal: who asks, exactly what would run or change, and the answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from codewhale.approval_answers import Answer, approvals
from codewhale.sanitize import clean_text
from codewhale.tui.armed import ArmedKeys
from codewhale.tui.diff_view import diff_counts, highlighted_diff, looks_like_diff

if TYPE_CHECKING:
    from textual.widgets.button import ButtonVariant

    from codewhale.runtime import events

# Beside the approving answers that fit the request (codewhale/approval_answers.py), the
# dialog offers these: (decision, button label, key). ApprovalScreen.offers says which.
BATCH = Answer("approve_batch", "Approve all {n}", "b")
DENY = Answer("deny", "Deny", "n")
DENY_SAYING = Answer("deny_message", "Deny and say why", "m")
VARIANTS: dict[str, ButtonVariant] = {"approve": "success", "deny": "error"}


class ApprovalScreen(ArmedKeys, ModalScreen[str]):
    """Dismissed with 'approve', 'approve_always', 'approve_file', 'accept_edits',
    'approve_batch' (this request and the `queued` ones from the same requester) or 'deny'
    (with `message` when the user typed one for the model)."""

    DEFAULT_CSS = """
    ApprovalScreen #approval .what {
        height: auto;
        max-height: 60vh;
        margin-bottom: 1;
    }
    ApprovalScreen #approval .preview { padding: 0 1; }
    ApprovalScreen #approval .buttons {
        layout: grid;
        grid-size: 3;
        grid-gutter: 0 2;
        grid-rows: 1;
        grid-columns: auto;
        height: auto;
    }
    ApprovalScreen #approval .buttons Button { width: auto; }
    ApprovalScreen #approval #deny-message { display: none; margin-top: 1; }
    ApprovalScreen #approval #deny-message.-shown { display: block; }
    ApprovalScreen #approval .keys { color: $text-muted; margin-top: 1; }
    """
    # The command or diff area takes focus, so arrow keys scroll it and no answer button
    # sits under Enter; the answer keys reach the screen's bindings from there.
    AUTO_FOCUS = ".what"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("y", "answer('approve')", "Approve once"),
        Binding("a", "answer('approve_always')", "Always"),
        Binding("p", "answer('approve_project')", "Always in this project"),
        Binding("f", "answer('approve_file')", "This file"),
        Binding("e", "answer('accept_edits')", "Accept edits"),
        Binding("b", "answer('approve_batch')", "Approve all queued"),
        Binding("n,escape", "answer('deny')", "Deny"),
        Binding("m", "answer('deny_message')", "Deny and say why"),
    ]

    def __init__(self, request: events.ApprovalRequested, *, queued: int = 0) -> None:
        """`queued`: how many more requests from the same requester wait behind this one."""
        super().__init__()
        self.request = request
        self.queued = queued
        self.message = ""  # what the user typed for the model with a denial
        self.arm()

    def answers(self) -> list[Answer]:
        """The answers that fit this request: edit answers for a file change, "always" for
        other calls; the batch answer (shown only while others wait) before the denials."""
        request = self.request
        return [*approvals(request.file_change, bool(request.files)), BATCH, DENY, DENY_SAYING]

    def offers(self) -> list[Answer]:
        """The answers offered now, the batch one labelled with how many it approves."""
        offered = []
        for answer in self.answers():
            if answer is BATCH:
                if not self.queued:
                    continue
                answer = answer._replace(label=answer.label.format(n=self.queued + 1))
            offered.append(answer)
        return offered

    def set_queued(self, queued: int) -> None:
        """More requests from the same requester arrived (or were answered): say so."""
        if queued == self.queued:
            return
        self.queued = queued
        if self.is_mounted:
            self._show_offers()
            self.refresh_bindings()

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="approval"):
            yield Static(title(request), classes="title")
            with VerticalScroll(classes="what"):
                # Everything the call would run, never cut: approving means approving it all.
                yield Static(Text(command_text(request)), classes="command")
                if request.preview:
                    preview = clean_text(request.preview)
                    body = highlighted_diff(preview) if looks_like_diff(preview) else Text(preview)
                    yield Static(body, classes="preview")
            # The rule an answer stores, read before the choice rather than found out after.
            yield Static(scope_text(request), classes="scope", markup=False)
            with Grid(classes="buttons"):
                for decision, _, _ in self.answers():
                    yield Button(
                        "", id=decision, variant=VARIANTS.get(decision, "default"), compact=True
                    )
            yield Input(
                placeholder="Tell the model why, or what to do instead; Enter sends, Esc backs out",
                id="deny-message",
            )
            yield Static("", classes="keys", markup=False)

    def on_mount(self) -> None:
        self._show_offers()

    def _show_offers(self) -> None:
        """Label the offered answers' buttons, hide the rest, and list the keys."""
        offered = {decision: (label, key) for decision, label, key in self.offers()}
        for button in self.query(Button):
            button.display = str(button.id) in offered
            if button.display:
                label, key = offered[str(button.id)]
                # Labels are markup: `[y]` unescaped is read as a tag and disappears.
                button.label = escape(f"{label} [{key}]")
        keys = " · ".join(
            f"{key}{' / Esc' if decision == 'deny' else ''} {label.lower()}"
            for decision, (label, key) in offered.items()
        )
        self.query_one(".keys", Static).update(f"{keys} · ↑ ↓ scroll")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """An answer's key works only where its button is offered."""
        if action == "answer" and parameters:
            return any(parameters[0] == decision for decision, _, _ in self.offers())
        return True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self._give(str(event.button.id))

    def action_answer(self, answer: str) -> None:
        if not self.armed():
            return  # typed before the dialog could be read
        self._give(answer)

    def _give(self, answer: str) -> None:
        box = self.query_one("#deny-message", Input)
        if answer == "deny_message":
            box.add_class("-shown")
            box.focus()
        elif answer == "deny" and box.has_focus:
            # Esc while typing backs out of the message, not out of the dialog.
            box.remove_class("-shown")
            self.query_one(".what").focus()
        else:
            self.dismiss(answer)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.message = " ".join(event.value.split())
        self.dismiss("deny")


def title(request: events.ApprovalRequested) -> Text:
    """ "Sub-agent Moby asks to change calc.py  +3 −1": who, what, and the diff's size."""
    tool = clean_text(request.tool)
    if request.file_change and request.files:
        shown = ", ".join(clean_text(name) for name in request.files[:3])
        more = f" and {len(request.files) - 3} more" if len(request.files) > 3 else ""
        line = Text(f"{asker(request.requester)} asks to change {shown}{more}")
    else:
        line = Text(f"{asker(request.requester)} asks to run {tool}")
    preview = clean_text(request.preview)
    if preview and looks_like_diff(preview):
        added, removed = diff_counts(preview)
        line.append("  ")
        line.append(f"+{added}", style="bold green")
        line.append(" ")
        line.append(f"−{removed}", style="bold red")
    return line


def command_text(request: events.ApprovalRequested) -> str:
    """The call in full; a file change led by its tool (the file alone does not say how)."""
    said = clean_text(request.summary or request.arguments)
    return f"{clean_text(request.tool)} {said}" if request.file_change else said


def scope_text(request: events.ApprovalRequested) -> str:
    """What the lasting answers store: for a file change its files and every edit, for
    other calls the rule "always" grants."""
    if request.file_change:
        files = ", ".join(clean_text(name) for name in request.files)
        this_file = f"“This file” allows every change to {files}; " if files else ""
        return f"{this_file}“Accept edits” lets every file change run unasked (this session)."
    return f"“Always” allows, for this session: {always_rule(request)}"


def asker(requester: str) -> str:
    """`parent` → "The parent"; a child's `nickname (name, type)` → "Sub-agent …"."""
    if requester == "parent":
        return "The parent"
    return f"Sub-agent {clean_text(requester)}"


def always_rule(request: events.ApprovalRequested) -> str:
    """The rule an "always" answer grants, in words (a request built without one: the tool)."""
    return clean_text(request.scope) or f"every {clean_text(request.tool)} call"


def covers(
    answer: str, answered: events.ApprovalRequested, waiting: events.ApprovalRequested
) -> bool:
    """Whether `answer` to `answered` also answers `waiting`, queued behind it: "accept all
    edits" covers every file change, "this file" changes to those files only (a protected
    write is never a file change here: it is asked on its own)."""
    if not waiting.file_change:
        return False
    if answer == "accept_edits":
        return True
    return (
        answer == "approve_file"
        and bool(waiting.files)
        and set(waiting.files) <= set(answered.files)
    )
