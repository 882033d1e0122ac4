"""Project instructions: the AGENTS.md and CLAUDE.md files every agent's prompt carries.

Order, from the most general to the most specific, so a closer file can refine what
a farther one says: the user's own files (CodeWhale's config dir, then Claude Code's
`~/.claude/CLAUDE.md`), then each directory from the repository root down to the
agent's working directory, AGENTS.md before CLAUDE.md in each. A file reached twice
(CLAUDE.md is often a link to AGENTS.md) is included once. Each file brings the files
it imports with `@path` (instruction_imports), counted in the same bound.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from codewhale.engine.instruction_imports import ImportScope, expand_imports
from codewhale.paths import claude_home, user_dirs

FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_FILE_CHARS = 20_000
# All files together; past it the most general files are left out first.
MAX_TOTAL_CHARS = 40_000
# A file over the limit is cut at the last line end this close to it, not mid-sentence.
LINE_SEARCH_CHARS = 2_000


@dataclass(frozen=True)
class Instructions:
    """The prompt text, and what the user should hear about how it was put together."""

    text: str
    warnings: tuple[str, ...] = ()


def instruction_files(directory: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The instruction files for an agent working in `directory`, most general first."""
    env = os.environ if env is None else env
    candidates = [user_dirs(env).config_dir / "AGENTS.md", claude_home(env) / "CLAUDE.md"]
    for folder in _root_down_to(directory.resolve()):
        candidates += [folder / name for name in FILE_NAMES]
    found: list[Path] = []
    seen: set[Path] = set()
    for path in candidates:
        # is_file first: it is False for a symlink loop, which resolve() would raise on.
        if path.is_file() and (real := path.resolve()) not in seen:
            seen.add(real)
            found.append(path)
    return found


def _root_down_to(directory: Path) -> list[Path]:
    """`directory` and its ancestors up to the repository root (itself if none), root first."""
    chain = [directory, *directory.parents]
    top = next((folder for folder in chain if (folder / ".git").exists()), directory)
    return list(reversed(chain[: chain.index(top) + 1]))


def project_instructions(directory: Path, env: Mapping[str, str] | None = None) -> str:
    """The prompt sections for `directory`'s instruction files, bounded in size ('' if none)."""
    return load_instructions(directory, env).text


def load_instructions(directory: Path, env: Mapping[str, str] | None = None) -> Instructions:
    """`directory`'s instruction files with their imports, cut and bounded, and the warnings."""
    env = os.environ if env is None else env
    directory = directory.resolve()
    files = instruction_files(directory, env)
    home = Path(env.get("HOME") or Path.home())
    scope = ImportScope.of(
        _root_down_to(directory)[0],
        [claude_home(env), home / ".codewhale", user_dirs(env).config_dir],
        home,
    )
    seen = {path.resolve() for path in files}
    warnings: list[str] = []
    sections: list[tuple[str, str]] = []  # (label, body), most general first
    for path in files:
        label = _label(path, directory)
        try:
            raw = path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:  # unreadable (permissions): the session opens without it
            warnings.append(f"{label} cannot be read ({error.strerror}), so it is left out")
            continue
        imports = expand_imports(path, raw, scope, seen, lambda p: _label(p, directory))
        warnings += imports.warnings
        parts = [_cut(raw, label)]
        for imported, text in imports.files:
            name = _label(imported, directory)
            parts.append(f"## Imported by {label}: {name}\n\n{_cut(text, name)}")
        body = "\n\n".join(part for part in parts if part)
        if body:
            sections.append((label, body))
    kept, dropped = _within_budget(sections)
    if dropped:
        warnings.append(
            f"instruction files left out to keep them within {MAX_TOTAL_CHARS:,} characters "
            f"in all (the closest files come first): {', '.join(dropped)}"
        )
    text = "\n\n".join(f"# Project instructions ({label})\n\n{body}" for label, body in kept)
    return Instructions(text, tuple(warnings))


def _within_budget(sections: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """The sections that fit, most general first, and the labels of those left out."""
    kept: list[tuple[str, str]] = []
    total = 0
    # Most specific first, so the farthest files are the ones dropped; once one does
    # not fit, every farther one goes too, keeping the order general-to-specific whole.
    for index in range(len(sections) - 1, -1, -1):
        label, body = sections[index]
        if total + len(body) > MAX_TOTAL_CHARS:
            return list(reversed(kept)), [label for label, _ in sections[: index + 1]]
        total += len(body)
        kept.append((label, body))
    return list(reversed(kept)), []


def _cut(text: str, label: str) -> str:
    """`text` within MAX_FILE_CHARS, ending at a line end if one is near, with a marker."""
    text = text.strip()
    if len(text) <= MAX_FILE_CHARS:
        return text
    kept = text[:MAX_FILE_CHARS]
    line_end = kept.rfind("\n", MAX_FILE_CHARS - LINE_SEARCH_CHARS)
    if line_end > 0:
        kept = kept[:line_end]
    left_out = text[len(kept) :]
    lines = len(left_out.strip("\n").splitlines())
    return (
        f"{kept.rstrip()}\n\n[{label} is cut here: {len(left_out):,} more characters "
        f"({lines:,} lines) are left out, past the limit of {MAX_FILE_CHARS:,} per file]"
    )


def _label(path: Path, directory: Path) -> str:
    try:
        return str(path.resolve().relative_to(directory))
    except ValueError:
        return str(path)
