"""The completion list over the composer: `/` offers commands with their help, `@` files.

The list is a function of the composer's text and cursor: the word the cursor ends
(`/name` at the very start of the composer, or `@path` anywhere) decides what it
offers, recomputed on every edit, and before a key acts on it when an edit's message
has not arrived yet, so a fast key never acts on a stale list. While it is open
it takes ↑/↓ (move), Enter (pick), Tab (complete the common prefix, else pick) and
Esc (close, keeping the text); while it is closed the composer's keys mean what they
always do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import OptionList, TextArea
from textual.widgets.option_list import Option

from codewhale.tui.commands import CommandRegistry, SlashCommand

# Rows on screen at once; a longer list scrolls.
VISIBLE_ROWS = 8
# Paths offered for one query (the best first), and looked through for Tab's common prefix.
LISTED_PATHS = 50
PREFIX_PATHS = 1000
# The command column's width, so the descriptions line up.
COMMAND_COLUMN = 28
INDEXING = "indexing files…"
# The keys an open list takes from the composer.
LIST_KEYS = frozenset({"up", "down", "enter", "tab", "escape"})
_WORD_END = re.compile(r"\S*$")

Location = tuple[int, int]
PathSource = Callable[[str, int], "list[str] | None"]


@dataclass(frozen=True)
class Word:
    """The word being completed: its sigil, what follows it, and where it lies."""

    sigil: str  # "/" or "@"
    query: str
    start: Location  # the sigil's location
    end: Location  # the cursor


@dataclass(frozen=True)
class Candidate:
    """One row of the list: what picking it inserts (after the sigil) and how it reads."""

    value: str
    label: Text


def word_at_cursor(composer: TextArea) -> Word | None:
    """The `/command` or `@path` word that ends at the cursor, if the cursor ends one."""
    row, column = composer.cursor_location
    before = composer.document.get_line(row)[:column]
    found = _WORD_END.search(before)
    word = found.group() if found else ""
    start = (row, column - len(word))
    if word.startswith("/") and start == (0, 0):
        return Word("/", word[1:], start, (row, column))
    if word.startswith("@"):
        return Word("@", word[1:], start, (row, column))
    return None


def command_candidates(registry: CommandRegistry, query: str) -> list[Candidate]:
    """Commands whose name or alias starts with `query`, then those holding it; exact first."""
    wanted = query.lower()
    ranked: list[tuple[int, str, SlashCommand]] = []
    for command in registry.commands():
        names = (command.name, *command.aliases)
        shown = next((name for name in names if name.lower().startswith(wanted)), None)
        if shown is not None:
            rank = 0 if shown.lower() == wanted else 1
        elif wanted in command.name.lower():
            shown, rank = command.name, 2
        else:
            continue
        ranked.append((rank, shown, command))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [Candidate(shown, _command_label(shown, command)) for _, shown, command in ranked]


def _command_label(shown: str, command: SlashCommand) -> Text:
    label = Text(f"/{shown} {command.usage}".rstrip().ljust(COMMAND_COLUMN), style="bold")
    label.append(f" {command.help}", style="dim")
    return label


def path_candidates(paths: list[str]) -> list[Candidate]:
    return [Candidate(path, Text(path)) for path in paths]


def common_prefix_extension(query: str, values: list[str]) -> str | None:
    """The longer text every value starting with `query` shares, when several do."""
    starting = [value for value in values if value.lower().startswith(query.lower())]
    if len(starting) < 2:
        return None
    # The sorted first and last differ soonest: what they share, all of them share.
    first, last = min(starting), max(starting)
    shared = next(
        (i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first)
    )
    return first[:shared] if shared > len(query) else None


class CompletionMenu(OptionList, can_focus=False):
    """The list itself, drawn over the transcript just above the composer."""

    def __init__(self, on_pick: Callable[[int], None]) -> None:
        super().__init__(id="completion")
        self._on_pick = on_pick

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A click on a row picks it."""
        event.stop()
        self._on_pick(event.option_index)


class Completion:
    """Keeps the menu in step with the composer and applies the keys it takes."""

    def __init__(
        self,
        composer: TextArea,
        menu: CompletionMenu,
        commands: Callable[[], CommandRegistry],
        paths: PathSource,
    ) -> None:
        self.composer = composer
        self.menu = menu
        self.commands = commands
        self.paths = paths
        self.word: Word | None = None
        self.candidates: list[Candidate] = []
        # The composer's text and cursor when Esc closed the list: it stays closed until
        # either changes (an index refresh re-posts Changed with the same text).
        self._dismissed: tuple[str, Location] | None = None
        # The text and cursor the list was last worked out for.
        self._synced: tuple[str, Location] | None = None

    @property
    def is_open(self) -> bool:
        return bool(self.menu.display)

    def sync(self) -> None:
        """Recompute the list from the composer's text and cursor; show or hide it."""
        state = self._synced = (self.composer.text, self.composer.cursor_location)
        if self._dismissed is not None and self._dismissed != state:
            self._dismissed = None
        word = None if self._dismissed else word_at_cursor(self.composer)
        if word is None:
            self._show(None, [], waiting=False)
        elif word.sigil == "/":
            self._show(word, command_candidates(self.commands(), word.query), waiting=False)
        else:
            found = self.paths(word.query, LISTED_PATHS)
            self._show(word, path_candidates(found or []), waiting=found is None)

    def take_key(self, key: str) -> bool:
        """Apply `key` to the list if it is open and takes it; False leaves it to the composer."""
        if key not in LIST_KEYS:
            return False
        # An edit whose Changed message has not arrived yet: the list catches up first
        # (arrows through an unchanged list do not query the file index again).
        if (self.composer.text, self.composer.cursor_location) != self._synced:
            self.sync()
        if not self.is_open:
            return False
        if key == "escape":
            self._dismissed = (self.composer.text, self.composer.cursor_location)
            self._show(None, [], waiting=False)
        elif key == "up":
            self.menu.action_cursor_up()
        elif key == "down":
            self.menu.action_cursor_down()
        elif key == "enter":
            return self._enter()
        else:
            self._tab()
        return True

    def reopen(self) -> None:
        """Open the list again after Esc closed it, and apply Tab to it."""
        self._dismissed = None
        self.sync()
        self.take_key("tab")

    def pick(self, index: int) -> None:
        """Replace the word with the candidate at `index`, followed by a space."""
        if self.word is None or not 0 <= index < len(self.candidates):
            return
        self._replace_word(self.candidates[index].value + " ")

    def _enter(self) -> bool:
        highlighted = self._highlighted()
        if highlighted is None:  # still indexing: Enter sends, as with no list
            return False
        assert self.word is not None
        if self.candidates[highlighted].value.lower() == self.word.query.lower():
            # What is typed is already what the row says: Enter sends it (`/help` runs).
            self._show(None, [], waiting=False)
            return False
        self.pick(highlighted)
        return True

    def _tab(self) -> None:
        assert self.word is not None
        query = self.word.query
        if self.word.sigil == "/":
            values = [candidate.value for candidate in self.candidates]
        else:
            values = self.paths(query, PREFIX_PATHS) or []
        extended = common_prefix_extension(query, values)
        if extended is not None:
            self._replace_word(extended)
        elif (highlighted := self._highlighted()) is not None:
            self.pick(highlighted)

    def _highlighted(self) -> int | None:
        index = self.menu.highlighted
        return index if index is not None and index < len(self.candidates) else None

    def _replace_word(self, value: str) -> None:
        assert self.word is not None
        result = self.composer.replace(self.word.sigil + value, self.word.start, self.word.end)
        self.composer.move_cursor(result.end_location)
        self.sync()

    def _show(self, word: Word | None, candidates: list[Candidate], *, waiting: bool) -> None:
        kept = self._highlighted()
        kept_value = self.candidates[kept].value if kept is not None else None
        self.word, self.candidates = word, candidates
        menu = self.menu
        if not candidates and not waiting:
            menu.display = False
            return
        menu.clear_options()
        if waiting:
            menu.add_option(Option(Text(INDEXING, style="dim"), disabled=True))
        else:
            menu.add_options(Option(candidate.label) for candidate in candidates)
            values = [candidate.value for candidate in candidates]
            # The row the user moved to stays highlighted while it is still offered.
            menu.highlighted = values.index(kept_value) if kept_value in values else 0
        menu.styles.height = min(len(candidates) or 1, VISIBLE_ROWS) + 2  # and its border
        menu.display = True
        self.place()
        # The edit that opened it may grow the composer (a new line) at the next layout.
        menu.call_after_refresh(self.place)

    def place(self) -> None:
        """Put the open list right above the composer, as wide as it."""
        region, styles = self.composer.region, self.menu.styles
        height = int(styles.height.value) if styles.height is not None else 0
        styles.width = region.width
        styles.offset = (region.x, max(region.y - height, 0))
