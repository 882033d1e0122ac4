"""Unified diffs on screen: a summary line with +/− counts that expands to coloured lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.markup import escape
from textual.widgets import Collapsible, Static

from codewhale.sanitize import clean_text

if TYPE_CHECKING:
    from rich.syntax import Syntax

# Past this many lines the body shows the start and says how much is left out.
MAX_DIFF_LINES = 400
THEME = "ansi_dark"
# Backgrounds of added and removed lines, dim enough that the code's colours stay readable.
ADDED_LINE = "on #12361e"
REMOVED_LINE = "on #3d1519"
_HEADER_STYLES = {"@@": "cyan", "+++": "bold", "---": "bold"}


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


def _cut(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_DIFF_LINES:
        return lines
    return [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]


def diff_renderable(diff: str) -> Syntax:
    """The diff coloured by Rich's diff lexer, cut at MAX_DIFF_LINES."""
    # Here, not at the top: rich.syntax loads pygments, which the first frame does without.
    from rich.syntax import Syntax

    lines = _cut(clean_text(diff).splitlines())
    return Syntax("\n".join(lines), "diff", theme=THEME, word_wrap=False)


def highlighted_diff(diff: str) -> Text:
    """The diff with each file's code coloured for its language (known from the file name),
    added lines on green and removed lines on red; cut at MAX_DIFF_LINES."""
    result = Text(no_wrap=True, overflow="ignore")
    lexer = "text"
    hunk: list[str] = []  # consecutive code lines of one file, highlighted together
    for line in _cut(clean_text(diff).splitlines()):
        if line[:1] in (" ", "+", "-") and not line.startswith(("+++ ", "--- ")):
            hunk.append(line)
            continue
        _append_hunk(result, hunk, lexer)
        hunk = []
        if line.startswith("+++ "):
            lexer = _lexer_for(line[4:].split("\t")[0].strip())
        result.append(line + "\n", style=_HEADER_STYLES.get(line[:3].rstrip(), "dim"))
    _append_hunk(result, hunk, lexer)
    result.rstrip()
    return result


def _lexer_for(name: str) -> str:
    from rich.syntax import Syntax  # pygments: loaded only once a diff is shown

    guessed = Syntax.guess_lexer(name[2:] if name.startswith(("a/", "b/")) else name)
    return "text" if guessed == "default" else guessed


def _append_hunk(result: Text, lines: list[str], lexer: str) -> None:
    """Append diff lines: their code highlighted as one text (so a string or comment
    spanning lines is coloured right), each line's background by its sign."""
    if not lines:
        return
    from rich.syntax import Syntax

    code = Syntax("", lexer, theme=THEME).highlight("\n".join(line[1:] for line in lines))
    for line, coloured in zip(lines, code.split("\n", allow_blank=True), strict=False):
        sign = line[:1]
        row = Text()
        row.append(sign, style="bold green" if sign == "+" else "bold red" if sign == "-" else "")
        row.append_text(coloured)
        if sign != " ":
            row.stylize(ADDED_LINE if sign == "+" else REMOVED_LINE)
        result.append_text(row)
        result.append("\n")


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
