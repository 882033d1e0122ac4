"""Line endings kept as the file has them while its text is edited with plain "\\n" breaks.

The edit tools match and change text whose lines end in "\\n" (what read_file shows and
models write). Every line an edit leaves alone keeps its own ending (LF, CRLF, or a mix of
both), and so does the file's last line, with or without a final newline. A changed line
keeps the ending of the line it replaced when the edit keeps the number of lines; any other
new line break takes the file's prevailing ending.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate, repeat
from typing import NamedTuple

# (start, end, replacement): characters [start, end) of the "\n" text become the replacement.
Span = tuple[int, int, str]


class Line(NamedTuple):
    """A line's text and the ending it is stored with: "\\n", "\\r\\n", "" after the
    file's last line, None for a new line (it takes the file's prevailing ending)."""

    text: str
    ending: str | None


def splice(text: str, spans: Sequence[Span]) -> str:
    """`text` with each span, in order and not overlapping, replaced."""
    pieces, position = [], 0
    for start, end, replacement in spans:
        pieces += [text[position:start], replacement]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


class LineText:
    """A file's text split into lines with their endings, and rebuilt after an edit.

    Lines are kept as two parallel lists, not Line objects: a big file has hundreds of
    thousands, and an edit only needs the few it touches.
    """

    def __init__(self, text: str) -> None:
        self.text = text.replace("\r\n", "\n")
        self._texts = self.text.split("\n")
        crlf = len(text) - len(self.text)
        if crlf:
            ended = text.split("\n")[:-1]
            self._endings = ["\r\n" if part.endswith("\r") else "\n" for part in ended]
        else:  # LF throughout: the common case, done without a step per line
            self._endings = list(repeat("\n", len(self._texts) - 1))
        self._endings.append("")
        self.newline = "\r\n" if 2 * crlf > len(self._texts) - 1 else "\n"
        # Where each line starts in `text`: the lengths before it, plus one "\n" each.
        widths = map((1).__add__, map(len, self._texts[:-1]))
        self._starts = [0, *accumulate(widths)]

    def lines(self) -> list[Line]:
        """Every line with its ending, the last one's "" (it has no line break after it)."""
        return list(map(Line, self._texts, self._endings))

    def join(self, lines: Sequence[Line]) -> str:
        """The file's text from `lines`: stored endings kept, new ones the prevailing one."""
        return self._joined([line.text for line in lines], [line.ending for line in lines])

    def replace(self, spans: Sequence[Span]) -> str:
        """The file's text with `spans` of the "\\n" text replaced, in order and not overlapping."""
        texts: list[str] = []
        endings: list[str | None] = []
        placed = 0  # lines before this one are in the result already
        for first, last, group in self._groups(spans):
            base = self._starts[first]
            segment = self.text[base : self._starts[last] + len(self._texts[last])]
            rows = splice(segment, [(s - base, e - base, new) for s, e, new in group]).split("\n")
            touched: list[str | None] = list(self._endings[first : last + 1])
            if len(rows) != len(touched):
                touched = [*[None] * (len(rows) - 1), touched[-1]]
            texts += [*self._texts[placed:first], *rows]
            endings += [*self._endings[placed:first], *touched]
            placed = last + 1
        texts += self._texts[placed:]
        endings += self._endings[placed:]
        return self._joined(texts, endings)

    def _joined(self, texts: list[str], endings: list[str | None]) -> str:
        """Each line followed by its ending (None or "" before another line: the prevailing
        one); the last line by none."""
        if not texts:
            return ""
        pieces: list[str] = [""] * (2 * len(texts) - 1)
        pieces[0::2] = texts
        pieces[1::2] = [ending or self.newline for ending in endings[:-1]]
        return "".join(pieces)

    def _line_at(self, offset: int) -> int:
        return bisect_right(self._starts, offset) - 1

    def _groups(self, spans: Sequence[Span]) -> Iterator[tuple[int, int, list[Span]]]:
        """The spans gathered by the lines they touch: (first line, last line, spans)."""
        group: list[Span] = []
        first = last = 0
        for span in spans:
            start, end = self._line_at(span[0]), self._line_at(span[1])
            if group and start > last:
                yield first, last, group
                group = []
            if not group:
                first = start
            group.append(span)
            last = end
        if group:
            yield first, last, group
