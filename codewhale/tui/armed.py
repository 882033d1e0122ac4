"""Dialogs that open on their own (an approval, a project's MCP servers) while you may be
typing: their answer keys count only once the dialog has been on screen for a moment, so
a "y" or "t" mid-sentence meant for the composer cannot answer it unseen. Buttons (a
click, Enter on a focused button) still answer at once."""

from __future__ import annotations

import time


class ArmedKeys:
    ARM_SECS = 0.4

    def arm(self) -> None:
        """Start the delay; called when the dialog is made."""
        self.armed_at = time.monotonic() + self.ARM_SECS

    def armed(self) -> bool:
        return time.monotonic() >= self.armed_at
