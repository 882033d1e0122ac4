"""Walk a workspace the way git sees it: .gitignore files (nested too) are honoured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pathspec

from codewhale.tools.base import ToolError
from codewhale.tools.files import open_regular

ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})


def _load_ignore(directory: Path) -> pathspec.GitIgnoreSpec | None:
    # A .gitignore that is a FIFO would hang every walk, so it is opened as files.py opens
    # any file: a symlinked one is not followed (nor is it by git since 2.32); hard links
    # are allowed, since its content only steers the walk and is never shown.
    try:
        with open_regular(directory / ".gitignore", ".gitignore", single_link=False) as stream:
            lines = stream.read().decode("utf-8", errors="replace").splitlines()
    except (ToolError, OSError):
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def iter_files(root: Path, start: Path | None = None) -> Iterator[Path]:
    """Every non-ignored regular file under `start` (default `root`), in sorted order."""
    root = root.resolve()
    start = (start or root).resolve()
    # Ignore files of the directories above `start` (up to the root) apply too;
    # `start`'s own is loaded by _walk.
    parts = start.relative_to(root).parts
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    for depth in range(len(parts)):
        directory = root.joinpath(*parts[:depth])
        if (spec := _load_ignore(directory)) is not None:
            specs.append((directory, spec))
    if start.is_file():
        if not _ignored(start, False, specs):
            yield start
        return
    yield from _walk(start, specs)


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> bool:
    for base, spec in specs:
        relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        if spec.match_file(relative):
            return True
    return False


def _walk(directory: Path, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> Iterator[Path]:
    own = _load_ignore(directory)
    if own is not None:
        specs = [*specs, (directory, own)]
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name in ALWAYS_SKIPPED:
            continue
        path = Path(entry.path)
        is_dir = entry.is_dir(follow_symlinks=False)
        if _ignored(path, is_dir, specs):
            continue
        if is_dir:
            yield from _walk(path, specs)
        elif entry.is_file(follow_symlinks=False):
            # Regular files only: FIFOs, devices, sockets and symlinks are part of the
            # tree, not something the model asked for, so they are skipped without a word.
            yield path
