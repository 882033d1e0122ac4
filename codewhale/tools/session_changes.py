"""What this session changed in its work tree, file by file, and who changed it.

The file tools already read each file before writing it (the journal's pre-image); the
first of those this session is kept here, by reference, so the bytes are held once. The
file as it is now is read only when someone asks for the changes (`/diff`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from codewhale.permissions import relative_to_workspace
from codewhale.tools.base import ToolError
from codewhale.tools.file_timeline import FileTimeline
from codewhale.tools.files import current_image, unified_diff
from codewhale.tools.journal import PreImage
from codewhale.tools.text_encoding import BinaryFile, decode_text

# Past this size a side is not diffed (difflib is quadratic in the worst case); its size shows.
MAX_DIFF_BYTES = 1024 * 1024


@dataclass
class _Record:
    """What the session holds for one file: its first pre-image and its writers' ids."""

    before: PreImage | None
    authors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Touched:
    """A file written this session: its first pre-image and its authors, named."""

    path: Path
    before: PreImage | None
    authors: tuple[str, ...]


class SessionChanges:
    """Per file, its content before the session first wrote it and who has written it since.

    One per session, shared by the parent and every child writing in the same work tree
    (a child in a worktree of its own is recorded when agent_apply brings its work in).
    """

    def __init__(self) -> None:
        self._files: dict[Path, _Record] = {}
        # The same writes, prompt by prompt, for /rewind.
        self.timeline = FileTimeline()

    def record(self, path: Path, before: PreImage | None, author: str) -> None:
        """`author` (a context's session id) is about to write `path`, which holds `before`."""
        record = self._files.setdefault(path, _Record(before))
        if author not in record.authors:
            record.authors.append(author)
        self.timeline.before_write(path, before)

    def wrote(self, path: Path, data: bytes | None) -> None:
        """A write recorded above has left `path` holding `data` (None: deleted)."""
        self.timeline.after_write(path, data)

    def wrote_all(self, images: Iterable[tuple[Path, PreImage | None]]) -> None:
        """What files hold just after a write recorded by `record_all` (agent_apply's)."""
        for path, image in images:
            self.wrote(path, None if image is None else image.data)

    def record_all(self, images: Iterable[tuple[Path, PreImage | None]], author: str) -> None:
        """`author` has just written these files, which held these images before."""
        for path, before in images:
            self.record(path, before, author)

    def touched(self, name_of: Callable[[str], str]) -> list[Touched]:
        """Every file written this session, its authors named by `name_of` in the order
        they first wrote it: a copy, taken on the event loop, that a thread can compare."""
        return [
            Touched(path, record.before, tuple(dict.fromkeys(map(name_of, record.authors))))
            for path, record in self._files.items()
        ]


def images_of(workspace: Path, paths: Iterable[Path]) -> list[tuple[Path, PreImage | None]]:
    """The files' bytes now, before something else (git apply) rewrites them.

    Paths outside `workspace`, or not regular files, are left out: the file tools could
    not have written them either.
    """
    images = []
    for path in paths:
        label = relative_to_workspace(workspace, path)
        try:
            images.append((path, current_image(workspace, path, label)))
        except ToolError:
            continue
    return images


@dataclass(frozen=True)
class FileChange:
    """One changed file: how it changed, who changed it, and its unified diff."""

    path: str
    authors: tuple[str, ...]
    # "created", "modified" or "deleted".
    status: str
    # The unified diff; empty when `note` says why there is none (binary, too large).
    diff: str = ""
    note: str = ""


def compare(workspace: Path, touched: Iterable[Touched]) -> list[FileChange]:
    """The files that differ now from before the session wrote them, sorted by path.

    A file written and then put back (or created and then deleted) is left out. Reads
    the disk: call it off the event loop.
    """
    found = []
    for file in touched:
        label = relative_to_workspace(workspace, file.path)
        try:
            now = current_image(workspace, file.path, label)
        except ToolError as error:
            found.append(FileChange(label, file.authors, "modified", note=str(error)))
            continue
        if now == file.before:
            continue
        status = "created" if file.before is None else "deleted" if now is None else "modified"
        found.append(_change(label, file.authors, status, file.before, now))
    return sorted(found, key=lambda change: change.path)


def _change(
    label: str, authors: tuple[str, ...], status: str, before: PreImage | None, now: PreImage | None
) -> FileChange:
    old = before.data if before is not None else b""
    new = now.data if now is not None else b""
    size = len(new if now is not None else old)
    if max(len(old), len(new)) > MAX_DIFF_BYTES:
        return FileChange(label, authors, status, note=f"too large to diff, {size:,} bytes")
    try:
        old_text = decode_text(old, label)[0]
        new_text = decode_text(new, label)[0]
    except BinaryFile:
        return FileChange(label, authors, status, note=f"binary, {size:,} bytes")
    if old_text == new_text:
        # Same text in other bytes: the encoding, a byte-order mark or the mode changed.
        return FileChange(label, authors, status, note="same text; bytes or mode changed")
    return FileChange(label, authors, status, diff=unified_diff(old_text, new_text, label))
