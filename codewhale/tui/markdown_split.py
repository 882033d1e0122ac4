"""Splits a streamed Markdown text into finished top-level blocks and the one still open.

Textual-free, so it is tested on its own (tests/unit/test_markdown_split.py); the answer
cell (tui/answer.py) builds widgets from what it returns. Only the open block's source is
parsed on each update: a finished block never is again, so an answer streams in time
linear in its length however many blocks it has.

A block is finished once the line that starts the next top-level block is complete. The
next block's start alone is not enough while its line is still arriving: `foo` then `#`
is a heading that ends the paragraph, but `#bar` would have been the paragraph's second
line. A fenced code block stays open until its closing fence, since until then it runs to
the end of the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token


@dataclass(frozen=True)
class Block:
    """A finished top-level block: its tokens, and its source for parsing it again."""

    source: str  # its lines, with the blank lines that follow it
    tokens: list[Token]
    line: int  # where `source` starts in the whole text
    base: int  # the line of the whole text that line 0 of the tokens' maps is


def parser() -> MarkdownIt:
    """The parser Textual's Markdown widget uses (it takes no options from us)."""
    return MarkdownIt("gfm-like")


class BlockSplitter:
    """Takes text as it streams; hands out each top-level block once it is finished."""

    def __init__(self, references: dict | None = None) -> None:
        self._parser = parser()
        self._open = ""  # the source from the open block's first line to the end
        self._open_line = 0
        self.base = 0  # the line of the whole text that the last parse's line 0 was
        self._pending: list[str] = []
        # Link reference definitions ([x]: url) apply to the whole document, also to the
        # blocks before them, which are finished: the caller rebuilds once at the end.
        self._references = references or {}
        self.saw_references = False
        self.parsed_chars = 0  # every character each parse was given, for the tests

    def feed(self, text: str) -> None:
        self._pending.append(text)

    @property
    def changed(self) -> bool:
        """Whether text came since the last split."""
        return bool(self._pending)

    def split(self) -> tuple[list[Block], list[Token]]:
        """The blocks finished since the last call, and the open block's tokens."""
        tokens = self._parse()
        starts = block_starts(tokens)
        complete_lines = self._open.count("\n")
        # The last block whose first line is complete; the blocks before it are finished.
        settled = [index for index, (_, line) in enumerate(starts) if line < complete_lines]
        if not settled or settled[-1] == 0:
            return [], tokens
        return self._take(tokens, starts, settled[-1]), tokens[starts[settled[-1]][0] :]

    def close(self) -> list[Block]:
        """Every block left, the open one included: the text is complete."""
        tokens = self._parse()
        starts = block_starts(tokens)
        blocks = self._take(tokens, starts, len(starts)) if starts else []
        self._open = ""
        return blocks

    def _parse(self) -> list[Token]:
        if self._pending:
            self._open += "".join(self._pending)
            self._pending.clear()
        self.base = self._open_line
        env: dict = {"references": dict(self._references)} if self._references else {}
        tokens = self._parser.parse(self._open, env)
        self.parsed_chars += len(self._open)
        if env.get("references"):
            self.saw_references = True
        return tokens

    def _take(self, tokens: list[Token], starts: list[tuple[int, int]], count: int) -> list[Block]:
        """Cut the first `count` blocks off the open source."""
        offsets = line_offsets(self._open)
        # Each block runs to the next one's first line; the last of all to the end.
        ends = [*starts[1:], (len(tokens), len(offsets) - 1)][:count]
        blocks = []
        first_line = 0  # the first block takes the blank lines before it too
        for (token, _), (end_token, end_line) in zip(starts[:count], ends, strict=True):
            blocks.append(
                Block(
                    source=self._open[offsets[first_line] : offsets[end_line]],
                    tokens=tokens[token:end_token],
                    line=self._open_line + first_line,
                    base=self._open_line,
                )
            )
            first_line = end_line
        self._open = self._open[offsets[first_line] :]
        self._open_line += first_line
        return blocks


def block_starts(tokens: list[Token]) -> list[tuple[int, int]]:
    """(token index, first line) of each top-level block: markdown-it gives each one a
    first token at level 0 that opens it or stands alone (a fence, a rule)."""
    return [
        (index, token.map[0])
        for index, token in enumerate(tokens)
        if token.level == 0 and token.nesting >= 0 and token.map is not None
    ]


def line_offsets(text: str) -> list[int]:
    """Where each line starts, and the end of the text: markdown-it's lines end at "\\n"
    only (str.splitlines also splits at U+2028 and others, which a model may write)."""
    offsets = [0]
    at = text.find("\n")
    while at != -1:
        offsets.append(at + 1)
        at = text.find("\n", at + 1)
    if offsets[-1] != len(text):
        offsets.append(len(text))
    return offsets
