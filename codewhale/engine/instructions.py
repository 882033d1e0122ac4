"""Project instructions: the AGENTS.md and CLAUDE.md files every agent's prompt carries.

Order, from the most general to the most specific, so a closer file can refine what
a farther one says: the user's own files (CodeWhale's config dir, then Claude Code's
`~/.claude/CLAUDE.md`), then each directory from the repository root down to the
agent's working directory, AGENTS.md before CLAUDE.md in each. A file reached twice
(CLAUDE.md is often a link to AGENTS.md) is included once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from codewhale.paths import claude_home, user_dirs

FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_FILE_CHARS = 20_000
# All files together; past it the most general files are left out first.
MAX_TOTAL_CHARS = 40_000


def instruction_files(directory: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The instruction files for an agent working in `directory`, most general first."""
    env = os.environ if env is None else env
    candidates = [user_dirs(env).config_dir / "AGENTS.md", claude_home(env) / "CLAUDE.md"]
    for folder in _root_down_to(directory.resolve()):
        candidates += [folder / name for name in FILE_NAMES]
    found: list[Path] = []
    seen: set[Path] = set()
    for path in candidates:
        real = path.resolve()
        if real not in seen and path.is_file():
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
    sections: list[str] = []
    total = 0
    # Most specific first while budgeting, so the farthest files are the ones dropped.
    for path in reversed(instruction_files(directory, env)):
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_FILE_CHARS].strip()
        if total + len(text) > MAX_TOTAL_CHARS:
            break
        if not text:
            continue
        total += len(text)
        sections.append(f"# Project instructions ({_label(path, directory)})\n\n{text}")
    return "\n\n".join(reversed(sections))


def _label(path: Path, directory: Path) -> str:
    directory = directory.resolve()
    try:
        return str(path.resolve().relative_to(directory))
    except ValueError:
        return str(path)
