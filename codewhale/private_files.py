"""Files the app writes that may quote the conversation: 0600, in folders that are 0700.

Sessions, sub-agent records and transcripts, logs and memory can hold anything the
agents read. Files are created with their mode (never chmod-ed after, which leaves a
moment when others can open them); the app's own folders are created 0700 and
tightened when opened, so a file an older version left wider is out of reach too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """`path` as a folder only its owner can enter: created so with any missing parent,
    and tightened if it is wider."""
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        # Another process may make it first; the mode check below still applies.
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=DIR_MODE)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        # Someone else's folder (a workspace shared with another user) stays as it is.
        with contextlib.suppress(PermissionError):
            path.chmod(mode & DIR_MODE)
    return path


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """An `opener` for `open()` that creates the file 0600."""
    return os.open(path, flags, FILE_MODE)
