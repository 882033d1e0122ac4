"""What a turn held open for its children is waiting on, and what woke it.

The engine keeps the session's turn open while children it opened run (`WaitStarted`,
`WaitEnded`); without these the status line said "working" for minutes and the next
model call started with no visible cause.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codewhale.runtime.events import AgentEvent, AgentSnapshot


def names_text(names: list[str]) -> str:
    """`Moby`, `Moby and Orca`, `Moby, Orca and Willy`."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def waiting_text(count: int) -> str:
    return f"waiting on {count} sub-agent{'' if count == 1 else 's'}"


class ChildWait:
    """Follows one wait at a time, from the events in the order they were sent."""

    def __init__(self) -> None:
        self.waiting = False
        self._waited: dict[str, str] = {}  # agent_id -> nickname, of the children waited on
        self._ended: list[str] = []  # their nicknames, in the order they ended

    def start(self, children: list[AgentSnapshot]) -> None:
        self.waiting = True
        self._waited = {child.agent_id: child.nickname for child in children}
        self._ended = []

    def saw(self, event: AgentEvent) -> None:
        """A mailbox event: a child waited on that ended is what wakes the turn."""
        # Here, not at the top: the event classes load with the session, after the first frame.
        from codewhale.runtime.events import AgentFinished

        if not self.waiting or not isinstance(event, AgentFinished):
            return
        nickname = self._waited.pop(event.agent_id, None)
        if nickname is not None:
            self._ended.append(nickname)

    @property
    def remaining(self) -> int:
        """Children waited on that have not ended: 0 once the turn is not waiting."""
        return len(self._waited) if self.waiting else 0

    def end(self) -> str:
        """The wait is over: the transcript's marker of what woke the turn ("" if none did,
        as when a steer or Esc ended it)."""
        ended, self._ended = self._ended, []
        self.waiting = False
        self._waited = {}
        return f"{names_text(ended)} finished — continuing" if ended else ""
