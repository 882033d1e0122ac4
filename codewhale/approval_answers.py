"""The answers an approval request may take, in one place: the app's dialog and
`codewhale exec --approve ask` offer the same ones.

A file change may be approved once, for the files it touches for the rest of the session
("this file"), or together with every file change after it ("accept edits", Agent mode's
posture). Any other call may be approved once, for the session by the rule the request
names ("always"), or by the same rule kept in the project's `.claude/settings.local.json`.
Each answer is a decision the engine's dispatcher acts on (docs/EVENTS.md).
"""

from __future__ import annotations

from typing import NamedTuple


class Answer(NamedTuple):
    decision: str  # what the dispatcher receives
    label: str  # the dialog's button
    key: str  # the key that gives it, in the dialog and at the terminal


APPROVE = Answer("approve", "Approve once", "y")
ALWAYS = Answer("approve_always", "Always this session", "a")
PROJECT = Answer("approve_project", "Always in this project", "p")
THIS_FILE = Answer("approve_file", "This file", "f")
ACCEPT_EDITS = Answer("accept_edits", "Accept edits", "e")


def approvals(file_change: bool, names_files: bool) -> list[Answer]:
    """The approving answers that fit a request: the edit answers for a file change ("this
    file" only where it names its files), the lasting ones for any other call."""
    if file_change:
        return [APPROVE, *([THIS_FILE] if names_files else []), ACCEPT_EDITS]
    return [APPROVE, ALWAYS, PROJECT]
