"""/rewind: the user's prompts of this run as checkpoints, and going back to one of them.

A checkpoint is taken as each prompt joins the conversation: where it sits in the
messages, and the file timeline's mark (tools/file_timeline.py). Going back restores
the conversation to just before the prompt, the files to their state then, or both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from codewhale.engine.conversation import Conversation
from codewhale.tools.file_timeline import FileTimeline


@dataclass(frozen=True)
class RewindPoint:
    """One earlier prompt the session can go back to."""

    number: int
    text: str
    sent_at: float  # wall clock
    # False once a compaction has summarised it: only the files can go back then.
    conversation: bool
    # Where the prompt sits in the messages, and the file timeline's mark (None: no files).
    index: int
    mark: int | None


@dataclass
class RewindOutcome:
    """What a rewind did, for the front end to say."""

    prompt: str
    dropped_messages: int = 0
    restored: list[str] = field(default_factory=list)
    # "label: why", for each file left as it is.
    skipped: list[str] = field(default_factory=list)

    def summary(self, *, conversation: bool, files: bool) -> str:
        lines = []
        if conversation:
            lines.append(f"Conversation rewound: {self.dropped_messages} message(s) dropped.")
        if files:
            names = ", ".join(self.restored) or "none needed"
            lines.append(f"Files restored ({len(self.restored)}): {names}")
        lines += [f"Not restored: {reason}" for reason in self.skipped]
        return "\n".join(lines)


@dataclass
class _Checkpoint:
    number: int
    # Where the prompt's message sits; the messages only grow until a clear or a rewind,
    # so it is still there while that very message is (compared by identity).
    index: int
    message: dict[str, Any]
    sent_at: float
    mark: int | None  # the file timeline's, or None where files are not recorded


class Checkpoints:
    """The prompts sent in this run, in order, each with where it sits and its file mark."""

    def __init__(self, conversation: Conversation, timeline: FileTimeline | None) -> None:
        self.conversation = conversation
        self.timeline = timeline
        self._taken: list[_Checkpoint] = []

    def prompt_sent(self, index: int) -> None:
        """The engine has just added a prompt at `index`; no tool of its turn has run."""
        mark = self.timeline.mark() if self.timeline is not None else None
        number = self._taken[-1].number + 1 if self._taken else 1
        message = self.conversation.messages[index]
        self._taken.append(_Checkpoint(number, index, message, time.time(), mark))

    def points(self) -> list[RewindPoint]:
        """The prompts still in the conversation (not cleared or rewound away), newest first."""
        points = []
        for checkpoint in reversed(self._taken):
            index = self._index(checkpoint)
            if index is None:
                continue
            summarised = self.conversation.summary is not None
            points.append(
                RewindPoint(
                    checkpoint.number,
                    str(checkpoint.message.get("content") or ""),
                    checkpoint.sent_at,
                    conversation=not (summarised and index < self.conversation.recent_start),
                    index=index,
                    mark=checkpoint.mark,
                )
            )
        return points

    def find(self, number: int) -> RewindPoint | None:
        """Prompt `number`, if it is still in the conversation."""
        return next((point for point in self.points() if point.number == number), None)

    def _index(self, checkpoint: _Checkpoint) -> int | None:
        messages, index = self.conversation.messages, checkpoint.index
        return index if index < len(messages) and messages[index] is checkpoint.message else None


def title_of(messages: list[dict[str, Any]]) -> str:
    """A conversation's title as the session list shows it: its first prompt, if any."""
    for message in messages[1:]:
        if message.get("role") == "user":
            return str(message.get("content") or "")[:80]
    return ""
