"""Paint first: what the composer sends waits here until the session is open.

The app paints its first frame before the session exists (the engine, provider client
and config models load after it, off the event loop). The composer keeps echoing keys
meanwhile; what it posts (a sent prompt, Tab, Esc, edits) bubbles through this
container, which holds it, in order, until the session is ready. A prompt sent during
start-up is therefore kept and goes out as soon as it can.
"""

from __future__ import annotations

import asyncio

from textual.containers import Container
from textual.message import Message
from textual.widget import Widget


class StartupGate(Container):
    """Holds the messages of the widgets inside it until `ready` is set."""

    DEFAULT_CSS = """
    StartupGate {
        height: auto;
    }
    """

    class Hold(Message, bubble=False):
        """Sent to itself on mount: handling it waits for `ready`, and the queue with it."""

    def __init__(self, *children: Widget, ready: asyncio.Event) -> None:
        super().__init__(*children)
        self.ready = ready

    def on_mount(self) -> None:
        self.post_message(self.Hold())

    async def on_startup_gate_hold(self, message: Hold) -> None:
        # Messages bubbling up from the composer queue behind this one.
        await self.ready.wait()
