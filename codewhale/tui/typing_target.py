"""Text typed where nothing takes text goes to the screen's text box instead of vanishing.

After Shift+Tab into the transcript, a click on a sidebar row or a return from an agent
screen, the focus rests on a widget that ignores letters. The app decides where a key
goes before it routes it (`CodeWhaleApp.on_event`), so moving the focus here is in
the order the keys came: however fast they are typed, none is lost or reordered.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from textual import events
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, TextArea


@runtime_checkable
class TypesInto(Protocol):
    """A screen with a text box that takes what is typed elsewhere on it."""

    def typing_target(self) -> Widget | None:
        """The box (while disabled, a finished child's, it takes nothing), or None."""
        ...


def redirect_typing(
    screen: Screen, event: events.Key | events.Paste, target: Widget | None
) -> None:
    """Give `target` the focus, its cursor at the end, when `event` (a printable key or a
    paste) is text that the focused widget would drop; routed after this, it lands there."""
    if target is None or target.disabled:
        return
    if isinstance(event, events.Key) and not event.is_printable:
        return
    focused = screen.focused
    if focused is target or isinstance(focused, Input | TextArea):
        return  # already typing somewhere
    if isinstance(event, events.Key) and event.key in screen.active_bindings:
        return  # a key something on the screen binds keeps its meaning
    screen.set_focus(target)
    if isinstance(target, TextArea):
        target.move_cursor(target.document.end)
    elif isinstance(target, Input):
        target.cursor_position = len(target.value)
