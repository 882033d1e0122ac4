"""Claude Code's `@path` imports in instruction files: found, resolved, bounded and read.

A line of CLAUDE.md (or AGENTS.md) that says `See @docs/git.md` brings that file into
the prompt, as Claude Code does: relative to the importing file, `@~/x` from the home
directory, nested at most MAX_DEPTH files deep. Only files inside the workspace or the
user's own config directories are read, since an instruction file is text a cloned
repository controls and the prompt goes to the provider. `@` inside code (fenced blocks,
code spans) and inside a word (`a@b.c`) is no import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from codewhale.tools.base import ToolError
from codewhale.tools.workspace_fs import open_in, parent_directory

# Claude Code follows imports five hops deep.
MAX_DEPTH = 5
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+).+?\1")
# `@` at the start of a line or after a space or an opening bracket.
_IMPORT = re.compile(r"(?<![^\s(\[])@([^\s`'\"<>()\[\]{},;]+)")
# What makes a reference a path worth a warning when missing; `@alice` names no file.
_PATH_LIKE = re.compile(r"/|^~|\.[A-Za-z0-9]{1,4}$")


@dataclass(frozen=True)
class ImportScope:
    """Where imports may lead: the workspace and the user's own config directories."""

    workspace: Path  # resolved, as are the directories
    user_config_dirs: tuple[Path, ...]
    home: Path

    @classmethod
    def of(cls, workspace: Path, user_config_dirs: Iterable[Path], home: Path) -> ImportScope:
        own = tuple(path.resolve() for path in user_config_dirs)
        return cls(workspace.resolve(), own, home)

    def root_of(self, path: Path) -> Path | None:
        roots = (self.workspace, *self.user_config_dirs)
        return next((root for root in roots if path.is_relative_to(root)), None)


@dataclass(frozen=True)
class Imports:
    files: list[tuple[Path, str]]  # (resolved path, text), in the order they are included
    warnings: list[str]


def references(text: str) -> list[str]:
    """The `@path` references in `text` outside code, in order, each once."""
    found: list[str] = []
    fence = ""
    for line in text.splitlines():
        if match := _FENCE.match(line):
            marker = match.group(1)
            if not fence:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = ""
            continue
        if fence:
            continue
        for reference in _IMPORT.findall(_CODE_SPAN.sub(" ", line)):
            # A sentence's own punctuation is not part of the path.
            reference = reference.rstrip(".:!?")
            if reference and reference not in found:
                found.append(reference)
    return found


def expand_imports(
    path: Path,
    text: str,
    scope: ImportScope,
    seen: set[Path],
    label: Callable[[Path], str],
) -> Imports:
    """The files `path` imports, nested ones after their importer; `seen` stops cycles."""
    imports = Imports([], [])

    def visit(importer: Path, body: str, depth: int) -> None:
        for reference in references(body):
            target = _target(reference, importer, scope.home)
            where = f"{label(importer)} imports @{reference}"
            try:
                real = target.resolve()
                is_file = real.is_file()
            except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the name
                real, is_file = target, False
            if real in seen:  # a cycle, or a file the prompt carries already
                continue
            if not is_file:
                if _PATH_LIKE.search(reference):
                    imports.warnings.append(f"{where}, which is not a file; left as written")
                continue
            root = scope.root_of(real)
            if root is None:
                imports.warnings.append(
                    f"{where}: {real} is outside the workspace and your config directories "
                    f"({', '.join(map(str, scope.user_config_dirs))}), so it is not read"
                )
                continue
            if depth > MAX_DEPTH:
                imports.warnings.append(
                    f"{where}: imports nest at most {MAX_DEPTH} files deep, so it is not read"
                )
                continue
            try:
                content = _read_beneath(root, real)
            except ToolError as error:
                imports.warnings.append(f"{where}: {error}")
                continue
            seen.add(real)
            imports.files.append((real, content))
            visit(real, content, depth + 1)

    visit(path, text, 1)
    return imports


def _target(reference: str, importer: Path, home: Path) -> Path:
    if reference == "~" or reference.startswith("~/"):
        return home / reference[2:]
    path = Path(reference)
    return path if path.is_absolute() else importer.parent / path


def _read_beneath(root: Path, path: Path) -> str:
    """The file's text, reached from `root` without symlinks: what was checked is what is read."""
    label = str(path)
    with parent_directory(root, path, label) as (directory, name):
        descriptor = open_in(directory, name, os.O_RDONLY, label, "read")
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read().decode("utf-8", "replace")
