"""What a sandbox is asked for, and what a probe found: shared by both backends."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT_SECS = 10


@dataclass(frozen=True)
class SandboxSpec:
    """What one command may reach: its workspace (writable or not), the network, not `hidden`."""

    workspace: Path
    cwd: Path
    writable: bool
    network: bool
    hidden: tuple[Path, ...] = ()
    # Directories shown read-only even under the private /tmp (the RLM kernel's Python).
    visible: tuple[Path, ...] = ()
    # Inside a writable workspace (gitdir.py): directories kept in place, writable but not
    # to be renamed or removed, then paths kept read-only (the repository's settings).
    pinned: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Probe:
    launcher: str | None  # the bwrap or sandbox-exec that confines commands here
    reason: str
    # Linux: the seccomp program that keeps offline commands off Unix sockets, if bwrap
    # could load it here (seccomp.py).
    socket_filter: bytes | None = None


def failure(argv: list[str], pass_fds: tuple[int, ...] = ()) -> str | None:
    """Why `argv` fails (the last line of its stderr), or None if it exits 0."""
    try:
        done = subprocess.run(
            argv,
            pass_fds=pass_fds,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECS,
            env={"PATH": os.environ.get("PATH", os.defpath)},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1][:300] if lines else f"exit code {done.returncode}"
