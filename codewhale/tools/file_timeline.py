"""The session's file writes, prompt by prompt, so /rewind can put files back as they were.

Every write in the session's work tree (the parent's, a child's writing there, an
isolated child's work applied into it) is recorded twice: the file's pre-image before
it, the first one per file per checkpoint being the file as it was when that prompt was
sent; and a digest of what the write left, so a file changed since by other means (by
hand, by a shell command) is found and left alone rather than clobbered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from codewhale.permissions import relative_to_workspace
from codewhale.tools.base import ToolError
from codewhale.tools.files import current_image, write_regular
from codewhale.tools.journal import PreImage
from codewhale.tools.workspace_fs import remove


def digest(data: bytes | None) -> str | None:
    """A file's bytes as a short value to compare (None: no file)."""
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class FileTimeline:
    """Per checkpoint, each written file's first pre-image; per file, what the app last left."""

    # Segment 0 holds writes before the first prompt (none in practice); `mark` opens the next.
    _segments: list[dict[Path, PreImage | None]] = field(default_factory=lambda: [{}])
    _left: dict[Path, str | None] = field(default_factory=dict)

    def mark(self) -> int:
        """A prompt is being sent: later writes belong to it. Returns its checkpoint."""
        self._segments.append({})
        return len(self._segments) - 1

    def before_write(self, path: Path, image: PreImage | None) -> None:
        self._segments[-1].setdefault(path, image)

    def after_write(self, path: Path, data: bytes | None) -> None:
        """The app's write left `path` holding `data` (None: deleted)."""
        self._left[path] = digest(data)

    def images_at(self, checkpoint: int) -> dict[Path, PreImage | None]:
        """Each file written since `checkpoint`, as it was then (None: it did not exist)."""
        images: dict[Path, PreImage | None] = {}
        for segment in self._segments[checkpoint:]:
            for path, image in segment.items():
                images.setdefault(path, image)
        return images

    def changed_elsewhere(self, path: Path, now: PreImage | None) -> bool:
        """Whether `path` no longer holds what the app's last write left there."""
        return path in self._left and self._left[path] != digest(None if now is None else now.data)


@dataclass(frozen=True)
class FileRestore:
    """One file to put back: its path, its name in the workspace, and its content then."""

    path: Path
    label: str
    image: PreImage | None
    now: PreImage | None


@dataclass
class RestorePlan:
    """What a rewind of the files would do, worked out before anything is written."""

    restores: list[FileRestore] = field(default_factory=list)
    # "label: why", for each file left as it is.
    skipped: list[str] = field(default_factory=list)


def plan_restore(workspace: Path, timeline: FileTimeline, checkpoint: int) -> RestorePlan:
    """The files to put back to their state at `checkpoint`; reads the disk (off the loop)."""
    plan = RestorePlan()
    for path, image in timeline.images_at(checkpoint).items():
        label = relative_to_workspace(workspace, path)
        try:
            now = current_image(workspace, path, label)
        except ToolError as error:
            plan.skipped.append(f"{label}: {error}")
            continue
        if now == image:
            continue  # already as it was (written, then put back)
        if timeline.changed_elsewhere(path, now):
            plan.skipped.append(
                f"{label}: changed outside the app's file tools since its last write "
                "(by hand or by a shell command); left as it is"
            )
            continue
        plan.restores.append(FileRestore(path, label, image, now))
    plan.restores.sort(key=lambda restore: restore.label)
    return plan


def apply_restore(
    workspace: Path, plan: RestorePlan, timeline: FileTimeline
) -> tuple[list[str], list[str]]:
    """Write the plan's files back byte for byte; (labels restored, "label: why" refused).

    Each restore is recorded as a write, so a later rewind to a prompt before this one
    still finds every file as it was then.
    """
    restored, refused = [], []
    for restore in plan.restores:
        timeline.before_write(restore.path, restore.now)
        try:
            if restore.image is None:
                # Removes a name only, in its own directory: never writes through.
                remove(workspace, restore.path, restore.label, missing_ok=True)
            else:
                write_regular(
                    restore.path,
                    restore.image.data,
                    restore.label,
                    workspace=workspace,
                    mode=restore.image.mode,
                )
        except ToolError as error:
            refused.append(str(error))
            continue
        except OSError as error:
            refused.append(f"{restore.label}: {error.strerror}")
            continue
        timeline.after_write(restore.path, None if restore.image is None else restore.image.data)
        restored.append(restore.label)
    return restored, refused
