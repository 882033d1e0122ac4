"""Esc twice on an empty composer: the key that opens /rewind's picker."""

from __future__ import annotations

import time
from typing import ClassVar


class EscapeTwice:
    """Tells a second Esc on an empty composer, pressed soon after the first."""

    WINDOW_SECS: ClassVar[float] = 0.8

    def __init__(self) -> None:
        self._first: float | None = None

    def pressed(self, *, empty: bool) -> bool:
        """An Esc was pressed; True when it is the second of a pair on an empty composer."""
        now = time.monotonic()
        if not empty or self._first is None or now - self._first > self.WINDOW_SECS:
            self._first = now if empty else None
            return False
        self._first = None
        return True
