"""/relay: the model writes the hand-off as its answer, and the app saves it.

The app writes the file itself, so the hand-off works in every mode (Plan mode refuses
the model's own writes) and the model needs no write tool for it.
"""

from __future__ import annotations

import re
from pathlib import Path

from codewhale.paths import WorkspacePaths
from codewhale.tools.base import ToolError
from codewhale.tools.files import read_text
from codewhale.tools.workspace_fs import replace_file

# An answer wrapped whole in one fenced block: the block's inside is the document.
_FENCED = re.compile(r"\A```[\w-]*\n(?P<body>.*)\n```\Z", re.DOTALL)


class RelayError(Exception):
    """The hand-off could not be saved; the message says why."""


def handoff_path(workspace: Path) -> Path:
    return WorkspacePaths(workspace).handoff_file


def earlier_handoff(workspace: Path) -> str:
    """The hand-off file as it is now ("" when there is none or it cannot be read)."""
    path = handoff_path(workspace)
    try:
        return read_text(path, ".codewhale/handoff.md", workspace=workspace)
    except ToolError:  # NoSuchPath among them
        return ""


def handoff_document(answer: str) -> str:
    """The document in the model's answer: its text, unwrapped from a code fence."""
    text = answer.strip()
    fenced = _FENCED.match(text)
    if fenced is not None:
        text = fenced.group("body").strip()
    return text + "\n" if text else ""


def save_handoff(workspace: Path, answer: str) -> Path:
    """Write the answer's document to the hand-off file, replacing it at once."""
    document = handoff_document(answer)
    if not document:
        raise RelayError("the model's answer was empty, so there was nothing to save")
    path = handoff_path(workspace)
    try:
        replace_file(workspace, path, document.encode("utf-8"), ".codewhale/handoff.md")
    except ToolError as error:
        raise RelayError(str(error)) from None
    return path
