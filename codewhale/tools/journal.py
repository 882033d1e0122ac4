"""Pre-images of every file a turn changes, so `revert_turn` can put them back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ChangeJournal:
    """Per turn, the content each changed file had before its first write (None = absent)."""

    turns: list[tuple[int, dict[Path, bytes | None]]] = field(default_factory=list)
    current_turn: int = 0

    def begin_turn(self, turn: int) -> None:
        self.current_turn = turn

    def before_write(self, path: Path) -> None:
        """Record `path`'s content unless this turn already recorded it."""
        if not self.turns or self.turns[-1][0] != self.current_turn:
            self.turns.append((self.current_turn, {}))
        images = self.turns[-1][1]
        if path not in images:
            images[path] = path.read_bytes() if path.is_file() else None

    def revert(self, count: int) -> list[Path]:
        """Restore the files of the last `count` turns that changed files, newest first."""
        restored: list[Path] = []
        for _ in range(min(count, len(self.turns))):
            _, images = self.turns.pop()
            for path, content in images.items():
                if content is None:
                    path.unlink(missing_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(content)
                restored.append(path)
        return restored
