"""The OS sandbox around shell commands, and the environment they start with.

The shell classifier can only guess what a command does: `find -fprint0`, a
`core.fsmonitor` hook or a workspace script named `cat` all look read-only to it.
The sandbox makes the guess irrelevant to safety: a command whose conversation may
not write runs on a read-only filesystem (and one that may keeps its repository's
settings read-only), a command that may not use the network has none, nor Unix
sockets, neither sees the app's secrets, and nothing it starts outlives it.
On Linux the sandbox is bubblewrap; on macOS it is Seatbelt (`sandbox-exec`), which
enforces the same rules where macOS can express them (seatbelt.py says where not).
docs/SECURITY.md is the user-facing account of these rules.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from codewhale.sandbox import bwrap, seatbelt
from codewhale.sandbox.environment import NON_INTERACTIVE_ENV, PASSED_ENV, child_environment
from codewhale.sandbox.gitdir import git_settings
from codewhale.sandbox.hidden import hidden_paths, socket_dirs
from codewhale.sandbox.seccomp import program_fd
from codewhale.sandbox.spec import Probe, SandboxSpec

__all__ = [
    "NON_INTERACTIVE_ENV",
    "PASSED_ENV",
    "Launch",
    "SandboxSpec",
    "SandboxStatus",
    "Switch",
    "child_environment",
    "describe",
    "git_settings",
    "hidden_paths",
    "sandbox_status",
    "sandboxed",
]

Switch = bool | Literal["auto"]


@dataclass(frozen=True)
class SandboxStatus:
    """Whether shell commands run sandboxed; `reason` says which launcher, or why not."""

    available: bool
    reason: str


def sandbox_status(enabled: Switch = "auto") -> SandboxStatus:
    """Whether commands run sandboxed under this `[sandbox] enabled` setting, and why (not).

    For the status line, `config show` and `exec`; the first call starts the sandbox
    once (a few ms) and the answer is kept for the life of the process.
    """
    if enabled is False:
        return SandboxStatus(False, "switched off by [sandbox] enabled = false")
    probe = _probe()
    return SandboxStatus(probe.launcher is not None, probe.reason)


def describe(status: SandboxStatus, enabled: Switch) -> str:
    """One line for the user: whether the sandbox is on, and what happens if it is not."""
    if status.available:
        return f"sandbox on: {status.reason}"
    if enabled is True:
        consequence = "shell commands and RLM code are refused ([sandbox] enabled = true)"
    else:
        consequence = (
            "shell commands and RLM code run unconfined, guarded only by the command "
            "classifier and approvals (RLM code is refused in Plan mode)"
        )
    return f"no sandbox ({status.reason}): {consequence}; see docs/SECURITY.md"


@dataclass(frozen=True)
class Launch:
    """A command line to start, and the descriptors it must inherit (`pass_fds`)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()


@contextlib.contextmanager
def sandboxed(command: Sequence[str], spec: SandboxSpec) -> Iterator[Launch]:
    """`command` confined as `spec` allows: start it inside the `with` block, whose end
    closes the descriptors passed to it. Only call when sandbox_status() is available.

    On Linux an offline command gets the seccomp filter that keeps it off Unix sockets,
    or where none could be loaded, /run and /var/run hidden. On macOS each call makes a
    fresh scratch dir for the command's TMPDIR. Nothing removes it when the command
    ends: it lives in the per-user temp dir, whose stale entries macOS purges by itself.
    """
    probe = _probe()
    if probe.launcher is None:
        raise RuntimeError(f"the sandbox is not available: {probe.reason}")
    if sys.platform == "darwin":
        scratch = Path(tempfile.mkdtemp(prefix="codewhale-sandbox-"))
        yield Launch([*seatbelt.seatbelt_arguments(probe.launcher, spec, scratch), *command])
    elif spec.network:
        yield Launch([*bwrap.bwrap_arguments(probe.launcher, spec), "--", *command])
    elif probe.socket_filter is None:
        spec = replace(spec, hidden=(*spec.hidden, *socket_dirs(spec.workspace)))
        yield Launch([*bwrap.bwrap_arguments(probe.launcher, spec), "--", *command])
    else:
        with program_fd(probe.socket_filter) as fd:
            arguments = bwrap.bwrap_arguments(probe.launcher, spec, seccomp_fd=fd)
            yield Launch([*arguments, "--", *command], pass_fds=(fd,))


def runs_under_init() -> bool:
    """Whether `sandboxed()` puts a namespace init between the launcher and the command.

    bwrap does (its PID 1 sits between us and the command); sandbox-exec execs in place.
    """
    return sys.platform != "darwin"


@functools.cache
def _probe() -> Probe:
    """This platform's launcher if it can build the sandbox here, or why not (once per process)."""
    if sys.platform.startswith("linux"):
        return bwrap.probe()
    if sys.platform == "darwin":
        return seatbelt.probe()
    return Probe(
        None,
        f"the sandbox needs Linux (bubblewrap) or macOS (sandbox-exec); this is {sys.platform}",
    )
