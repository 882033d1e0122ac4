"""Real disk faults for a child process: a full or read-only folder, a file size limit.

A private mount namespace (`unshare -rm`, no root needed where user namespaces are
allowed) lets a test put a tiny tmpfs (ENOSPC) or a read-only bind (EROFS) over one
folder for the child alone; RLIMIT_FSIZE makes the child's writes past a size fail
with EFBIG (Python ignores SIGXFSZ, which would otherwise kill it).
"""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# Sets the file size limit, then becomes the Python command that follows it.
_LIMITED = (
    "import os, resource, sys\n"
    "_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), hard))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


@functools.cache
def can_mount() -> bool:
    """Whether this machine lets a child mount in a namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    probe = "mount -t tmpfs -o size=4k tmpfs /tmp"
    done = subprocess.run(["unshare", "-rm", "sh", "-c", probe], capture_output=True)
    return done.returncode == 0


def full_disk(folder: Path, size: str = "64k") -> str:
    """Shell lines that put an empty tmpfs of `size` over `folder`."""
    return f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(folder))}"


def read_only(folder: Path) -> str:
    """Shell lines that make `folder` read-only."""
    where = shlex.quote(str(folder))
    return f"mount --bind -o ro {where} {where}"


def in_namespace(command: list[str], setup: str, after: str = "") -> list[str]:
    """`command` in a private mount namespace: `setup` first (a failure stops it), then
    the command, then `after` (e.g. copying out what a tmpfs holds); the command's exit
    status is the whole one's."""
    script = f'set -e\n{setup}\nset +e\n"$@"\nstatus=$?\n{after}\nexit $status\n'
    return ["unshare", "-rm", "sh", "-c", script, "sh", *command]


def size_limited(limit: int, python_arguments: list[str]) -> list[str]:
    """`python *python_arguments` with its files limited to `limit` bytes."""
    return [sys.executable, "-c", _LIMITED, str(limit), *python_arguments]
