"""A word to the user when long work ends while they look elsewhere: the terminal bell,
or a desktop notification asked of the terminal (OSC 9 or OSC 777)."""

from __future__ import annotations

import re

from codewhale.sanitize import clean_text

# Work shorter than this ends while the user is still there to see it.
MIN_SECS = 10.0
# A notification is a glance: the end of a long answer is cut.
MAX_CHARS = 160
BEL = "\a"
# Terminals that show OSC 777 ("notify") and not OSC 9; the rest (iTerm2, WezTerm,
# Windows Terminal, kitty, Ghostty, ConEmu) take OSC 9.
_OSC_777_TERMS = ("foot", "rxvt")


def notification(
    notify: str,
    notify_when: str,
    *,
    focused: bool,
    elapsed_secs: float,
    title: str,
    body: str,
    term: str = "",
) -> str | None:
    """What to write to the terminal for work that just ended, or None for nothing.

    `notify`, `notify_when`: the [tui] settings; `term`: $TERM, which picks the OSC.
    """
    if notify == "off" or elapsed_secs < MIN_SECS:
        return None
    if focused and notify_when != "always":
        return None
    if notify == "bell":
        return BEL
    title, body = _plain(title), _plain(body)
    if term.startswith(_OSC_777_TERMS):
        return f"\x1b]777;notify;{title.replace(';', ',')};{body}{BEL}"
    # Begins with the title's letters, so a body never reads as ConEmu's OSC 9;N codes.
    return f"\x1b]9;{title}: {body}{BEL}"


def _plain(text: str) -> str:
    """One line of printable text: model-written words must not reach the terminal as
    escape sequences, and a BEL or ST inside would end the OSC early."""
    text = re.sub(r"\s+", " ", clean_text(text)).strip()
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
