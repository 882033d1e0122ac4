"""`@path` in a sent message: the named workspace files' text goes to the model with it.

Which files a message names and what of each is attached (bounds, binary files, files
outside the workspace or denied by a rule); the text form they travel in is
tui/attachment_format.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

from codewhale.permissions import PathEscapeError, confine, relative_to_workspace
from codewhale.rules.ruleset import PermissionRules
from codewhale.tools.base import ToolError
from codewhale.tools.files import is_binary, open_regular
from codewhale.tui.attachment_format import Attachment

MAX_FILES = 3
MAX_FILE_CHARS = 20_000
MAX_TOTAL_CHARS = 50_000
# UTF-8 needs at most 4 bytes a character: reading this much always yields enough text.
_MAX_FILE_BYTES = 4 * MAX_FILE_CHARS + 4
# `@` starting a word; what follows, up to the next whitespace, is the path.
_MENTION = re.compile(r"(?:^|(?<=\s))@(\S+)")
# Punctuation that ends a sentence rather than a path ("see @notes.txt, then…").
_TRAILING = ".,;:!?)]}'\""


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
