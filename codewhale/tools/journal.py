"""Pre-images of every file a turn changes, so `revert_turn` can put them back.

A pre-image is the file's bytes as read, never text decoded from them, and its mode: a
restore writes back exactly what was there, whatever the encoding, and a script deleted
by a patch comes back executable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class PreImage:
    """A file as it was before a write: its exact bytes and its permission bits."""

    data: bytes
    mode: int


@dataclass
class ChangeJournal:
    """Per turn, what each changed file was before its first write (None = absent)."""

    turns: list[tuple[int, dict[Path, PreImage | None]]] = field(default_factory=list)
    current_turn: int = 0

    def begin_turn(self, turn: int) -> None:
        self.current_turn = turn

    def before_write(self, path: Path, image: PreImage | None) -> None:
        """Record `image`, `path` before a write, unless this turn already has one.

        The caller reads it through the workspace opener, as it reads anything it writes:
        read here by name, a swapped-in symlink could record an outside file's content,
        which a revert would then copy into the workspace.
        """
        if not self.turns or self.turns[-1][0] != self.current_turn:
            self.turns.append((self.current_turn, {}))
        self.turns[-1][1].setdefault(path, image)

    def take(self, count: int) -> list[tuple[Path, PreImage | None]]:
        """Remove and return the pre-images of the last `count` turns, newest first.

        The caller writes them back, through the same checks as any other write.
        """
        images: list[tuple[Path, PreImage | None]] = []
        for _ in range(min(count, len(self.turns))):
            images += self.turns.pop()[1].items()
        return images
