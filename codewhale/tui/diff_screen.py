"""/diff: the files this session changed, who changed them, and each one's unified diff.

The changes are read once, when the command runs (`Runtime.changes`), so the screen shows
one moment of the work tree; /diff again shows a later one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from codewhale.sanitize import clean_text
from codewhale.tui.diff_view import diff_counts, diff_renderable

if TYPE_CHECKING:
    from codewhale.tools.session_changes import FileChange
    from codewhale.tui.app import CodeWhaleApp

# git status's letters: a file the session created, changed or deleted.
STATUS_LETTERS = {"created": "A", "modified": "M", "deleted": "D"}

NO_CHANGES = (
    "No file changes in this session yet (/diff lists what write_file, edit_file, "
    "apply_patch and agent_apply changed; not what shell commands did)."
)


async def show_diff(app: CodeWhaleApp, arguments: str) -> None:
    """The /diff command: open the screen, or say in the transcript that nothing changed."""
    if arguments.strip():
        await app.transcript.notice("usage: /diff (it takes no arguments)", "error")
        return
    assert app.runtime is not None  # run_command refuses /diff when no session is open
    changes = await app.runtime.changes()
    if not changes:
        await app.transcript.notice(NO_CHANGES)
        return

    def back_to_composer(_: None) -> None:
        app.composer.focus()

    app.push_screen(DiffScreen(changes), callback=back_to_composer)


def file_row(change: FileChange) -> Text:
    """`M notes.txt  parent, Moby  +1 −1` (or the note, e.g. `binary, 9 bytes`)."""
    row = Text(f"{STATUS_LETTERS.get(change.status, '?')} ", style="bold")
    row.append(clean_text(change.path))
    row.append(f"  {clean_text(', '.join(change.authors))}  ", style="dim")
    if change.note:
        row.append(clean_text(change.note), style="italic")
    else:
        added, removed = diff_counts(change.diff)
        row.append(f"+{added}", style="green")
        row.append(f" −{removed}", style="red")
    return row


class DiffScreen(Screen[None]):
    """The changed files on the left; the highlighted one's diff, scrollable, on the right."""

    BINDINGS: ClassVar = [
        Binding("escape", "dismiss", "Back"),
        Binding("pagedown", "scroll_diff(1)", "Diff down", show=False),
        Binding("pageup", "scroll_diff(-1)", "Diff up", show=False),
    ]
    DEFAULT_CSS = """
    DiffScreen #diff-header { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    DiffScreen #diff-files { width: 2fr; max-width: 60; height: 1fr; border: none; }
    DiffScreen #diff-scroll { width: 3fr; height: 1fr; padding: 0 1; }
    DiffScreen #diff-body { width: auto; }
    """

    def __init__(self, changes: list[FileChange]) -> None:
        super().__init__()
        self.changes = changes

    def compose(self) -> ComposeResult:
        added = removed = 0
        for change in self.changes:
            plus, minus = diff_counts(change.diff)
            added, removed = added + plus, removed + minus
        count = len(self.changes)
        yield Static(
            f"Session changes · {count} file{'s' if count != 1 else ''} · +{added} −{removed}",
            id="diff-header",
        )
        with Horizontal():
            yield OptionList(*(Option(file_row(c)) for c in self.changes), id="diff-files")
            with ScrollableContainer(id="diff-scroll"):
                yield Static(id="diff-body")
        yield Footer()

    def on_mount(self) -> None:
        files = self.query_one("#diff-files", OptionList)
        files.highlighted = 0
        files.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show(event.option_index)

    def show(self, index: int) -> None:
        """Put the index-th file's diff (or why there is none) in the right-hand pane."""
        change = self.changes[index]
        body = self.query_one("#diff-body", Static)
        if change.diff:
            body.update(diff_renderable(change.diff))
        else:
            body.update(Text(f"{clean_text(change.path)}: {clean_text(change.note)}", "italic"))
        self.query_one("#diff-scroll").scroll_home(animate=False)

    def action_scroll_diff(self, pages: int) -> None:
        scroll = self.query_one("#diff-scroll", ScrollableContainer)
        if pages > 0:
            scroll.scroll_page_down(animate=False)
        else:
            scroll.scroll_page_up(animate=False)
