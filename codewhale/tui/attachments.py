"""`@path` in a sent message: the named workspace files' text goes to the model with it.

The model receives the message as typed, then one block per file:

    <attachment path="src/app.py" lines="120">
    …the file's text…
    </attachment>

A file cut at its bound says `truncated="first N characters"`; one not attached says
why in an empty element (`<attachment path="logo.png" omitted="binary file"/>`), so
the model knows what the user pointed at. The transcript shows the typed text and one
chip per file instead.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from codewhale.permissions import PathEscapeError, confine, relative_to_workspace
from codewhale.rules.ruleset import PermissionRules
from codewhale.tools.base import ToolError
from codewhale.tools.files import is_binary, open_regular

MAX_FILES = 3
MAX_FILE_CHARS = 20_000
MAX_TOTAL_CHARS = 50_000
# UTF-8 needs at most 4 bytes a character: reading this much always yields enough text.
_MAX_FILE_BYTES = 4 * MAX_FILE_CHARS + 4
# `@` starting a word; what follows, up to the next whitespace, is the path.
_MENTION = re.compile(r"(?:^|(?<=\s))@(\S+)")
# Punctuation that ends a sentence rather than a path ("see @notes.txt, then…").
_TRAILING = ".,;:!?)]}'\""


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


def collect(
    workspace: Path, message: str, rules: PermissionRules | None = None
) -> list[Attachment]:
    """The files `message` names with `@`, read within the bounds (blocking: file reads);
    a file a permission rule denies reading is named, never read (`rules`)."""
    found: list[Attachment] = []
    seen: set[Path] = set()
    budget = MAX_TOTAL_CHARS
    for raw in _MENTION.findall(message):
        target = _workspace_file(workspace, raw)
        if target is None or target[0] in seen:
            continue
        path, label = target
        seen.add(path)
        attached = [item for item in found if not item.omitted]
        denial = rules.denied_read("read_file", path) if rules is not None else None
        if denial is not None:
            found.append(Attachment(label, omitted=f"denied by the permission rule {denial.text}"))
        elif len(attached) >= MAX_FILES:
            found.append(Attachment(label, omitted=f"at most {MAX_FILES} files a message"))
        elif budget <= 0:
            found.append(Attachment(label, omitted=f"{MAX_TOTAL_CHARS:,} characters in all"))
        else:
            item = _read(workspace, path, label, min(MAX_FILE_CHARS, budget))
            budget -= len(item.text)
            found.append(item)
    return found


def _workspace_file(workspace: Path, raw: str) -> tuple[Path, str] | None:
    """The file `raw` names inside the workspace (trying it without trailing punctuation)."""
    for candidate in dict.fromkeys((raw, raw.rstrip(_TRAILING))):
        if not candidate:
            continue
        try:
            # Symlinks are resolved first: one leading out of the workspace is refused.
            path = confine(workspace, candidate)
        except PathEscapeError:
            continue
        if path.is_file():
            return path, relative_to_workspace(workspace, path)
    return None


def _read(workspace: Path, path: Path, label: str, limit: int) -> Attachment:
    try:
        # The file tools' rule: regular files only, never a FIFO or a hard-linked alias.
        with open_regular(path, label, workspace=workspace) as stream:
            data = stream.read(_MAX_FILE_BYTES)
    except ToolError as error:
        return Attachment(label, omitted=str(error))
    except OSError as error:
        return Attachment(label, omitted=error.strerror or "cannot be read")
    if is_binary(data):
        return Attachment(label, omitted="binary file")
    text = data.decode("utf-8", errors="replace")
    whole = len(data) < _MAX_FILE_BYTES and len(text) <= limit
    return Attachment(label, text[:limit], truncated=not whole)


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
