"""The workspace's files for `@` completion: listed off the event loop, ranked per keystroke.

The listing is git's view (`codewhale.tools.walk.iter_files`), made in a thread and
re-made in the background once it is older than REFRESH_AFTER_SECS, so a keystroke
never waits on git or a directory walk. CodeWhale's own state (`.codewhale/`) and
version-control metadata are never offered. Ranking is `fuzzy_score`'s, applied only
to the paths a regular expression over all of them finds: one pass in C instead of a
Python call per path for the many that do not match.
"""

from __future__ import annotations

import heapq
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

from codewhale.tools.search import fuzzy_score
from codewhale.tools.walk import ALWAYS_SKIPPED, iter_files

# A listing this old is re-made (in the background) at the next keystroke; the one
# in hand answers meanwhile. walk's own git cache holds a listing as long.
REFRESH_AFTER_SECS = 2.0
# Directories never offered: CodeWhale's session state, and version-control metadata.
HIDDEN_DIRECTORIES = frozenset({".codewhale", *ALWAYS_SKIPPED})
# Indexes kept for as many workspaces (one app has one; tests open many).
MAX_INDEXES = 8


@dataclass(frozen=True)
class _Listing:
    """One listing, swapped in whole so a reader never sees half of a rebuild."""

    paths: tuple[str, ...]
    lowered: tuple[str, ...]
    # The lower-cased paths one per line, and the line that starts at each offset.
    text: str
    line_at: dict[int, int]
    made: float

    @classmethod
    def of(cls, paths: Iterable[str]) -> _Listing:
        # A name holding a newline would break the one-path-a-line text (and cannot be typed).
        kept = tuple(path for path in paths if "\n" not in path and not _hidden(path))
        lowered = tuple(path.lower() for path in kept)
        line_at, offset = {}, 0
        for number, line in enumerate(lowered):
            line_at[offset] = number
            offset += len(line) + 1
        return cls(kept, lowered, "\n".join(lowered), line_at, time.monotonic())


def _hidden(path: str) -> bool:
    return not HIDDEN_DIRECTORIES.isdisjoint(path.split("/")[:-1])


def listed_paths(root: Path) -> list[str]:
    """Workspace-relative paths of the files git's view holds (blocking: git or a walk)."""
    root = root.resolve()
    return [path.relative_to(root).as_posix() for path in iter_files(root)]


class FileIndex:
    """A workspace's file paths, refreshed in a thread, matched on the calling thread."""

    def __init__(
        self,
        root: Path,
        *,
        lister: Callable[[Path], Iterable[str]] = listed_paths,
        refresh_after: float = REFRESH_AFTER_SECS,
    ) -> None:
        self.root = root
        self.lister = lister
        self.refresh_after = refresh_after
        self._listing: _Listing | None = None
        self._building = False
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        """Whether a listing has been made (matches are empty until then)."""
        return self._listing is not None

    def refresh(self, on_done: Callable[[], object] | None = None) -> None:
        """Re-list in a background thread if there is no listing or it is stale; returns at once.

        `on_done` runs in that thread once the new listing is in place.
        """
        with self._lock:
            listing = self._listing
            fresh = listing is not None and time.monotonic() - listing.made < self.refresh_after
            if fresh or self._building:
                return
            self._building = True
        threading.Thread(
            target=self._build, args=(on_done,), name="codewhale-file-index", daemon=True
        ).start()

    def build(self) -> None:
        """List the workspace now, on this thread (the background refresh does this)."""
        self._build(None)

    def _build(self, on_done: Callable[[], object] | None) -> None:
        try:
            self._listing = _Listing.of(self.lister(self.root))
        except OSError:
            # The workspace vanished or cannot be read: nothing to offer, and no traceback.
            self._listing = _Listing.of(())
        finally:
            with self._lock:
                self._building = False
        if on_done is not None:
            on_done()

    def matches(self, query: str, limit: int) -> list[str]:
        """The `limit` best paths for `query` (fuzzy, case-insensitive), best first; for
        an empty query (a bare `@`), the first paths listed."""
        listing = self._listing
        wanted = query.lower().replace("\n", "")
        if listing is None or limit <= 0:
            return []
        if not wanted:
            return list(listing.paths[:limit])
        # Each character after a run of anything but it: a line holding the query as a
        # subsequence matches without backtracking, and the rest cost one scan in C.
        pattern = "".join(f"[^\n{re.escape(char)}]*{re.escape(char)}" for char in wanted)
        found = re.finditer(f"^{pattern}[^\n]*", listing.text, re.MULTILINE)
        lines = [listing.line_at[match.start()] for match in found]
        # Scored on the lower-cased path, which fuzzy_score would compute anyway.
        scores = map(fuzzy_score, repeat(wanted), map(listing.lowered.__getitem__, lines))
        ranked = (
            (score, -line) for score, line in zip(scores, lines, strict=True) if score is not None
        )
        # Ties go to the path listed first (git lists in sorted order).
        return [listing.paths[-line] for _, line in heapq.nlargest(limit, ranked)]


_indexes: dict[Path, FileIndex] = {}


def index_for(workspace: Path) -> FileIndex:
    """The one index of `workspace`, made on first use (nothing is listed until refresh)."""
    index = _indexes.get(workspace)
    if index is None:
        if len(_indexes) >= MAX_INDEXES:
            _indexes.clear()
        index = _indexes[workspace] = FileIndex(workspace)
    return index
