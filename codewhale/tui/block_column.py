"""Where each finished block of an answer sits, so most of them need not be mounted.

Textual lays out every mounted widget of the screen on each layout, and a long answer's
blocks are tens of thousands of widgets (a list item is four): a 500 KB answer took
seconds per layout. So an answer keeps mounted only the blocks near the view; a spacer
as tall as the rest stands for them. That needs each block's position as Textual's
vertical layout would give it, computed here from the heights and margins measured
while the block was mounted. Textual-free, tested on its own.
"""

from __future__ import annotations

from bisect import bisect_right

from markdown_it.token import Token
from rich.cells import cell_len

# The rows above and below each kind of block, as Textual's Markdown CSS sets them.
MARGINS = {
    "h1": (2, 1),
    "h2": (2, 1),
    "h3": (1, 1),
    "h4": (1, 1),
    "h5": (1, 1),
    "h6": (1, 1),
    "fence": (1, 1),
    "code_block": (1, 1),
    "blockquote_open": (1, 1),
}
DEFAULT_MARGINS = (0, 1)  # paragraphs, lists, tables, rules
# A wrapped line is rarely filled to the last cell: words that do not fit go to the next.
WRAP_SLACK = 4


class Column:
    """Blocks stacked as Textual's vertical layout stacks them: the first one's top
    margin, then each block, the larger of two touching margins between two blocks."""

    def __init__(self) -> None:
        self._height: list[int] = []
        self._top: list[int] = []
        self._bottom: list[int] = []
        self._y: list[int] = []  # each block's top edge; valid below self._valid
        self._valid = 0
        self.measured: list[bool] = []

    def __len__(self) -> int:
        return len(self._height)

    def add(self, height: int, top: int, bottom: int) -> None:
        """A block not laid out yet, as tall as estimated until it is measured."""
        self._height.append(height)
        self._top.append(top)
        self._bottom.append(bottom)
        self.measured.append(False)

    def measure(self, index: int, height: int, top: int, bottom: int) -> bool:
        """Record a block's height and margins as laid out; True if they changed."""
        self.measured[index] = True
        if (self._height[index], self._top[index], self._bottom[index]) == (height, top, bottom):
            return False
        self._height[index], self._top[index], self._bottom[index] = height, top, bottom
        self._valid = min(self._valid, index)
        return True

    def top_margin(self, index: int) -> int:
        return self._top[index]

    def y(self, index: int) -> int:
        """The top edge of a block (below its top margin)."""
        self._place(index)
        return self._y[index]

    def end(self, next_top: int | None = None) -> int:
        """Where the next widget starts (its top edge) if one with top margin `next_top`
        follows the last block; with none, the height of the whole column."""
        if not self._height:
            return next_top or 0
        last = len(self._height) - 1
        bottom = self.y(last) + self._height[last]
        if next_top is None:
            return bottom + self._bottom[last]
        return bottom + max(self._bottom[last], next_top)

    def span(self, top: int, bottom: int) -> tuple[int, int]:
        """The blocks [first, last) that reach into the rows from `top` to `bottom`."""
        if not self._height:
            return 0, 0
        self._place(len(self._height) - 1)
        first = max(bisect_right(self._y, top) - 1, 0)
        last = max(bisect_right(self._y, bottom), first + 1)
        return first, last

    def gap(self, first: int, last: int, next_top: int | None) -> int:
        """The height of a spacer (no margins) standing for blocks [first, last), such
        that what follows it is where it would be with the blocks there: block `last`,
        or past the end a widget with top margin `next_top` (None: nothing)."""
        start = 0
        if first:
            before = first - 1
            start = self.y(before) + self._height[before] + self._bottom[before]
        if last < len(self._height):
            return self.y(last) - self._top[last] - start
        return self.end(next_top) - (next_top or 0) - start

    def height(self, index: int) -> int:
        return self._height[index]

    def _place(self, index: int) -> None:
        if index < self._valid:
            return
        del self._y[self._valid :]
        for at in range(self._valid, index + 1):
            if at == 0:
                self._y.append(self._top[0])
            else:
                previous = at - 1
                margin = max(self._bottom[previous], self._top[at])
                self._y.append(self._y[previous] + self._height[previous] + margin)
        self._valid = index + 1


def estimate(tokens: list[Token], width: int) -> tuple[int, int, int]:
    """Height, top and bottom margin of a block that was never laid out, from its tokens:
    the spacer that stands for it is only as right as this until it is mounted."""
    first = tokens[0]
    kind = first.tag if first.type == "heading_open" else first.type
    top, bottom = MARGINS.get(kind, DEFAULT_MARGINS)
    if kind in ("fence", "code_block"):
        return first.content.rstrip().count("\n") + 3, top, bottom  # padded a row each way
    if kind == "hr":
        return 2, top, bottom
    if kind == "table_open":  # a row and a rule for each row, and the header's
        return 2 * sum(token.type == "tr_open" for token in tokens) + 1, top, bottom
    rows = 0
    for token in tokens:
        if token.type == "inline":
            indent = 3 * max(token.level - 1, 0)  # bullets and quote borders
            rows += wrapped_rows(token, max(width - indent - WRAP_SLACK, 1))
        elif token.type in ("fence", "code_block"):
            rows += token.content.rstrip().count("\n") + 3
    return max(rows, 1), top, bottom


def wrapped_rows(inline: Token, width: int) -> int:
    """The rows an inline token's text wraps to: each hard break starts a row."""
    rows = 0
    line = 0
    for child in inline.children or ():
        if child.type == "hardbreak":
            rows += -(-line // width) or 1
            line = 0
        elif child.type == "softbreak":
            line += 1
        else:
            line += cell_len(child.content)
    return rows + (-(-line // width) or 1)
