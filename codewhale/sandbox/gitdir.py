"""The workspace repository's settings, which stay read-only for commands that may write.

A command allowed to write its workspace could otherwise plant what runs later, outside
the sandbox, when you (or the app) run git there: a hook in `.git/hooks`, a
`core.hooksPath`, `core.fsmonitor` or filter driver in `.git/config`, attributes or
excludes in `.git/info`. Objects, refs, the index and logs stay writable, so `git
commit`, `git checkout` and `git stash` still work inside.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

# What git reads as code or as instructions, in each git directory; created empty when
# missing (as `git init` makes them), since only an existing path can be mounted over.
_SETTINGS_DIRS = ("hooks", "info")
_SETTINGS = (*_SETTINGS_DIRS, "config", "config.worktree")


@dataclass(frozen=True)
class GitSettings:
    """Paths to mount in a writable workspace: `pinned` writable but fixed in place
    (a renamed `.git` would take its read-only parts along and leave room for a new one),
    then `read_only`."""

    pinned: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


def git_settings(workspace: Path) -> GitSettings:
    """The settings of the repository at `workspace`'s root (and of its submodules) that
    lie inside the workspace; creates their missing `hooks` and `info` directories.

    A worktree's `.git` is a file naming its git directory: the file is kept read-only,
    and that directory is protected here if it lies inside the workspace (outside it,
    everything is read-only already). A `.git` symlink cannot be pinned by a mount (a
    mount follows it), so only its target is protected.
    """
    workspace = workspace.resolve()
    dot_git = workspace / ".git"
    read_only: list[Path] = []
    if dot_git.is_symlink():
        git_dir = Path(os.path.realpath(dot_git))
    elif dot_git.is_file():
        read_only.append(dot_git)
        git_dir = _named_git_dir(dot_git)
    else:
        git_dir = dot_git
    if not git_dir.is_dir() or not git_dir.is_relative_to(workspace):
        return GitSettings(read_only=tuple(read_only))
    pinned: list[Path] = []
    for found in _git_dirs(git_dir):
        pinned.append(found)
        for name in _SETTINGS_DIRS:
            # Not there to mount over when it is a dangling link or the disk refuses.
            with contextlib.suppress(OSError):
                (found / name).mkdir(exist_ok=True)
        read_only += [path for name in _SETTINGS if (path := found / name).exists()]
    return GitSettings(tuple(pinned), tuple(read_only))


def _named_git_dir(dot_git_file: Path) -> Path:
    """The directory a `gitdir: <path>` file names (relative to the file), resolved."""
    try:
        first = dot_git_file.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return dot_git_file
    named = first.removeprefix("gitdir:").strip()
    return Path(os.path.realpath(dot_git_file.parent / named))


def _git_dirs(git_dir: Path) -> list[Path]:
    """`git_dir` and the git directories of its submodules (`modules/<name>`, nested)."""
    found = [git_dir]
    modules = git_dir / "modules"
    for root, subdirs, files in os.walk(modules):
        if "HEAD" in files and "config" in files:
            found.append(Path(root))
            # A submodule's own submodules live in its modules/; nothing else below holds one.
            subdirs[:] = [name for name in subdirs if name == "modules"]
    return found
