"""Real git repositories in temporary folders, for the worktree isolation tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# The user's own git settings (hooks, signing, default branch) stay out of the tests.
_ENV = {
    **{key: value for key, value in os.environ.items() if not key.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, env=_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """`root` as a repository with `files` committed (and whatever `root` already held)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def tree_state(root: Path) -> dict[str, bytes]:
    """Every file of the work tree and the index, byte for byte (CodeWhale's own state,
    which a session keeps writing, left out)."""
    state = {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not {".git", ".codewhale"} & set(path.relative_to(root).parts)
    }
    state[".git/index"] = (root / ".git" / "index").read_bytes()
    return state


def branches(root: Path) -> list[str]:
    return git(root, "branch", "--format=%(refname:short)").split()
