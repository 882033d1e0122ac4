"""A workspace's `.codewhale/state/`: private, and kept out of the user's `git status`.

`.codewhale/` also holds what users commit (config.toml, agents/); the state the app
writes there (sub-agent records, journals, transcripts, locks) is not. A `.gitignore`
inside `state/` that ignores everything, itself included, hides the state from git
without touching the project's ignore rules or anything else in `.codewhale/`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from codewhale.private_files import private_dir, private_opener

GITIGNORE = "# Written by CodeWhale: its working state is not meant to be committed.\n*\n"


def make_state_dir(state_dir: Path) -> Path:
    """`state_dir` made (0700), with a `.gitignore` in it that ignores all of it."""
    private_dir(state_dir)
    # "x": one already there (ours, or the user's own) is never replaced. One that cannot
    # be written (a read-only checkout) only leaves the state visible to git.
    with (
        contextlib.suppress(OSError),
        open(state_dir / ".gitignore", "x", encoding="utf-8", opener=private_opener) as file,
    ):
        file.write(GITIGNORE)
    return state_dir
