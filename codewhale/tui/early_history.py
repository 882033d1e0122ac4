"""A resumed conversation read straight from its session file, drawn before the session opens.

Opening a session (engine, provider client, agent definitions, a sandbox probe) takes
most of a `--continue` start, while its last turns need only the file: tens of
milliseconds for 5,000 messages. They are read here with the store's own loader, so
clear, rewind and compaction records count as they will once it opens. When it has
opened, its conversation is compared with what was drawn: the same one keeps the cells
on screen; a different one (the file changed meanwhile, a sub-agent's record settles its
cell) is drawn again.

The status line it will open with is drawn with it: the usage totals the file keeps, and
the context use the engine will count (the messages' sizes from the file, plus the tool
schemas' share the launch receipt remembers for this setup). When the session has opened
its own figures are drawn; the same ones change nothing on screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from codewhale.paths import user_dirs
from codewhale.runtime.resumed_figures import ResumedFigures, resumed_figures
from codewhale.sessions.store import SessionError, SessionStore
from codewhale.tui.launch_receipt import OpeningStatus


@dataclass(frozen=True)
class EarlyResume:
    """A session to be resumed, as its file has it."""

    messages: list[dict[str, Any]]
    figures: ResumedFigures

    def context(self, remembered: OpeningStatus) -> tuple[int, int] | None:
        """The context use the session will open with, by the status line remembered for
        this setup; None where that does not say what the tool schemas take."""
        if remembered.tools is None:
            return None
        return remembered.tools + self.figures.messages_tokens, remembered.context[1]


def read_resumed(workspace: Path, session_id: str | None) -> EarlyResume | None:
    """The session `--resume session_id` (or, without one, `--continue`) would resume;
    None where there is no such session or it cannot be read (opening it says why)."""
    store = SessionStore(user_dirs().data_dir)
    try:
        info = store.resumable(workspace.resolve(), session_id)
        if info is None:
            return None
        loaded = store.load(info.id)
    except (SessionError, OSError):
        return None
    # The cells' module (Markdown, the tool and agent cells) loads here, in the caller's
    # thread, rather than on the event loop when they are drawn.
    import_module("codewhale.tui.history")
    return EarlyResume(loaded.messages, resumed_figures(loaded))


def same_conversation(drawn: list[dict[str, Any]], opened: list[dict[str, Any]]) -> bool:
    """Whether the session that opened holds the conversation drawn from its file (the
    system prompt aside: it is not shown)."""
    return _shown(drawn) == _shown(opened)


def _shown(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [message for message in messages if message.get("role") != "system"]
