"""Unified diffs on screen: a summary line with +/− counts that expands to coloured lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.markup import escape
from textual.widgets import Collapsible, Static

from codewhale.sanitize import clean_text

if TYPE_CHECKING:
    from rich.syntax import Syntax

# Past this many lines the body shows the start and says how much is left out.
MAX_DIFF_LINES = 400


def diff_counts(diff: str) -> tuple[int, int]:
    """(lines added, lines removed), file headers not counted."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def diff_files(diff: str) -> list[str]:
    """The files a unified diff touches, from its `+++` headers (`a/`/`b/` dropped)."""
    names = []
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            if name == "/dev/null":
                continue
            names.append(name[2:] if name.startswith(("a/", "b/")) else name)
    return names


def looks_like_diff(text: str) -> bool:
    return any(line.startswith(("@@", "+++ ", "--- ")) for line in text.splitlines()[:20])


def _where(diff: str) -> str:
    files = diff_files(diff)
    return clean_text(files[0] if len(files) == 1 else f"{len(files)} files" if files else "diff")


def diff_summary(diff: str) -> str:
    """`calc.py +3 −1` (or `2 files +3 −1`)."""
    added, removed = diff_counts(diff)
    return f"{_where(diff)} +{added} −{removed}"


def diff_title(diff: str) -> str:
    """The summary as Collapsible title markup: the name escaped, the counts coloured."""
    added, removed = diff_counts(diff)
    return f"{escape(_where(diff))} [green]+{added}[/] [red]−{removed}[/]"


def diff_renderable(diff: str) -> Syntax:
    """The diff coloured by Rich's diff lexer, cut at MAX_DIFF_LINES."""
    # Here, not at the top: rich.syntax loads pygments, which the first frame does without.
    from rich.syntax import Syntax

    lines = clean_text(diff).splitlines()
    if len(lines) > MAX_DIFF_LINES:
        left = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"… {left} more lines"]
    return Syntax("\n".join(lines), "diff", theme="ansi_dark", word_wrap=False)


class DiffView(Collapsible):
    """Collapsed: the summary line; expanded: the whole coloured diff, built on first opening
    (most diffs in a long session are never opened)."""

    DEFAULT_CSS = """
    DiffView { border: none; padding: 0; margin: 0 0 0 2; }
    DiffView Contents { padding: 0 0 0 2; }
    """

    def __init__(self, diff: str, *, collapsed: bool = True, title: str | None = None) -> None:
        self.diff = diff
        self._body_shown = not collapsed
        # Collapsible titles are markup: a given title is escaped, the default one is built so.
        heading = escape(title) if title is not None else diff_title(diff)
        body = () if collapsed else (self._body(),)
        # Collapsible sets "-collapsed" on mount, styling the widget again; set now, it is free.
        folded = "-collapsed" if collapsed else ""
        super().__init__(*body, title=heading, collapsed=collapsed, classes=folded)

    def _body(self) -> Static:
        return Static(diff_renderable(self.diff), classes="diff-body")

    def watch_collapsed(self, collapsed: bool) -> None:
        if not collapsed and not self._body_shown:
            self._body_shown = True
            self.query_one(Collapsible.Contents).mount(self._body())
