"""Long pastes folded to a token (`[pasted 200 lines]`) in the composer and the transcript.

The composer inserts the token instead of the text and keeps the text here; a sent
message has each token still in it replaced by its text, so the model gets the paste
in full while the user edits and reads one line. Deleting a token drops its paste.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rich.text import Text

from codewhale.sanitize import clean_text
from codewhale.tui.transcript import UserMessage

# A paste longer than either is folded.
FOLD_LINES = 20
FOLD_CHARS = 2_000
TOKEN_STYLE = "reverse"
# A long message of a resumed session shows this much of its first line before the fold.
RESUMED_HEAD_CHARS = 200


def folds(text: str) -> bool:
    """Whether a paste of `text` is folded to a token."""
    return len(text.splitlines()) > FOLD_LINES or len(text) > FOLD_CHARS


def _label(text: str) -> str:
    lines = len(text.splitlines())
    if lines > FOLD_LINES:
        return f"pasted {lines:,} lines"
    return f"pasted {len(text):,} characters"


class Pastes:
    """The folded pastes of one composer, by token, for the whole session (history recall
    brings a token back, and it still stands for its text)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None

    def add(self, text: str) -> str:
        """Keep `text` and return the token that stands for it (unique in the session)."""
        # Terminals send a paste's line breaks as CR; the model and the composer use LF.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        label = _label(text)
        token, number = f"[{label}]", 1
        while token in self._texts:
            number += 1
            token = f"[{label} #{number}]"
        self._texts[token] = text
        self._pattern = None
        return token

    def used_in(self, message: str) -> dict[str, str]:
        """The pastes whose tokens `message` still holds, in the order it holds them."""
        if not self._texts:
            return {}
        if self._pattern is None:
            self._pattern = re.compile("|".join(map(re.escape, self._texts)))
        return {token: self._texts[token] for token in self._pattern.findall(message)}


def expand(message: str, pastes: Mapping[str, str]) -> str:
    """`message` with each token of `pastes` replaced by the text it stands for."""
    if not pastes:
        return message
    # One pass: a paste that itself holds a token's text is not expanded again.
    pattern = "|".join(map(re.escape, pastes))
    return re.sub(pattern, lambda found: pastes[found[0]], message)


def resumed_message(text: str) -> UserMessage:
    """A saved session's message, folded after its first line (or first characters) when
    long: where its pastes began was not saved, so the fold starts where it can."""
    if not folds(text):
        return UserMessage(text)
    newline = text.find("\n")
    cut = newline if 0 <= newline < RESUMED_HEAD_CHARS else RESUMED_HEAD_CHARS
    rest = text[cut:]
    more = len(text.splitlines()) - len(text[:cut].splitlines())
    label = f"{more:,} more lines" if newline == cut else f"{len(rest):,} more characters"
    token = f"[… {label}]"
    return PastedMessage(f"{text[:cut]} {token}", {token: rest})


class PastedMessage(UserMessage, can_focus=True):
    """A sent message holding folded pastes; a click or Enter shows them in full, again folds."""

    def __init__(self, text: str, pastes: Mapping[str, str], *, steer: bool = False) -> None:
        self.typed = text
        self.pastes = dict(pastes)
        self.steer = steer
        self.expanded = False
        super().__init__(text, steer=steer)

    def on_mount(self) -> None:
        # Here, not in __init__: a cell rebuilt for a resume is made before there is an app.
        self.tooltip = "click or Enter: show the pasted text"
        self.update(self._label())

    def _label(self) -> Text:
        label = Text("› steer  " if self.steer else "› ", style="bold")
        pattern = "(" + "|".join(map(re.escape, self.pastes)) + ")"
        for index, part in enumerate(re.split(pattern, self.typed)):
            if index % 2 == 0:  # re.split puts the tokens at the odd places
                label.append(clean_text(part))
            elif self.expanded:
                label.append(clean_text(self.pastes[part]), style="not bold")
            else:
                label.append(part, style=TOKEN_STYLE)
        return label

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self.update(self._label())

    def on_click(self) -> None:
        self.toggle()

    def key_enter(self) -> None:
        self.toggle()
