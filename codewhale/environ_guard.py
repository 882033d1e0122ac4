"""Keep the app's own environment (the API key) out of its children's reach.

Processes of the same user may read each other's `/proc/<pid>/environ`. Inside the
sandbox the app does not exist (a PID namespace of its own), but without one, and for
programs that run outside it (a trusted project's MCP server, repository code run by a
misjudged command), the app's environment would be one file read away. A process that
is not "dumpable" has its `/proc/<pid>/` files owned by root, so a same-user process can
no longer read them; the flag is reset by execve, so the programs we start keep theirs.
Root can still read them (CAP_SYS_PTRACE): running CodeWhale as root forgoes this guard.
"""

from __future__ import annotations

import sys

_PR_SET_DUMPABLE = 4


def seal_environment() -> bool:
    """Make this process undumpable on Linux; whether that took effect."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc prctl (musl builds have it; be safe)
        return False
