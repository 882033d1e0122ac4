"""The text form of `@path` attachments: how a sent message carries its files, and back.

The model receives the message as typed, then one block per file:

    <attachment path="src/app.py" lines="120">
    …the file's text…
    </attachment>

A file cut at its bound says `truncated="first N characters"`; one not attached says
why in an empty element (`<attachment path="logo.png" omitted="binary file"/>`), so
the model knows what the user pointed at. The transcript shows the typed text and one
chip per file instead. Standard library only: a resumed conversation's history is
split back into text and chips before the session (and what reads files) has loaded.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Attachment:
    """One `@path` that named a workspace file: its text, or why it was not attached."""

    path: str  # relative to the workspace, with `/`
    text: str = ""
    truncated: bool = False
    omitted: str = ""  # why it is not attached; empty when it is

    @property
    def lines(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)

    def chip(self) -> str:
        """What the transcript shows for it: `📎 notes.txt (12 lines)`."""
        if self.omitted:
            return f"📎 {self.path}: not attached ({self.omitted})"
        size = f"first {len(self.text):,} characters" if self.truncated else _plural(self.lines)
        return f"📎 {self.path} ({size})"

    def block(self) -> str:
        """The element the model receives."""
        path = html.escape(self.path, quote=True)
        if self.omitted:
            return f'<attachment path="{path}" omitted="{html.escape(self.omitted)}"/>'
        cut = f' truncated="first {len(self.text)} characters"' if self.truncated else ""
        body = self.text if self.text.endswith("\n") or not self.text else self.text + "\n"
        return f'<attachment path="{path}" lines="{self.lines}"{cut}>\n{body}</attachment>'


def _plural(lines: int) -> str:
    return "1 line" if lines == 1 else f"{lines} lines"


def with_attachments(message: str, attachments: list[Attachment]) -> str:
    """The message as the model receives it: the typed text, then each attachment."""
    if not attachments:
        return message
    return "\n\n".join([message, *(item.block() for item in attachments)])


_BLOCK = re.compile(
    r'<attachment path="(?P<path>[^"]*)"(?: omitted="(?P<omitted>[^"]*)"/>'
    r'|(?: lines="\d+")?(?P<cut> truncated="[^"]*")?>\n(?P<text>.*?)</attachment>)',
    re.S,
)


def split_attachments(sent: str) -> tuple[str, list[Attachment]]:
    """A message as sent (with_attachments) back into the typed text and its attachments."""
    typed, marker, rest = sent.partition("\n\n<attachment ")
    if not marker:
        return sent, []
    found = [
        Attachment(
            html.unescape(match["path"]),
            # block() ended a cut text with a newline of its own; the line count is the same.
            text=(match["text"] or "").removesuffix("\n") if match["cut"] else match["text"] or "",
            truncated=bool(match["cut"]),
            omitted=html.unescape(match["omitted"] or ""),
        )
        for match in _BLOCK.finditer("<attachment " + rest)
    ]
    return typed, found
