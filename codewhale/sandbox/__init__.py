"""The OS sandbox around shell commands, and the environment they start with.

The shell classifier can only guess what a command does: `find -fprint0`, a
`core.fsmonitor` hook or a workspace script named `cat` all look read-only to it.
The sandbox makes the guess irrelevant to safety: a command whose conversation may
not write runs on a read-only filesystem, a command that may not use the network
has none, neither sees the app's secrets, and nothing it starts outlives it.
On Linux the sandbox is bubblewrap; on macOS it is Seatbelt (`sandbox-exec`), which
enforces the same rules where macOS can express them (seatbelt.py says where not).
docs/SECURITY.md is the user-facing account of these rules.
"""

from __future__ import annotations

import functools
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codewhale.sandbox import bwrap, seatbelt
from codewhale.sandbox.environment import NON_INTERACTIVE_ENV, PASSED_ENV, child_environment
from codewhale.sandbox.hidden import hidden_paths
from codewhale.sandbox.spec import Probe, SandboxSpec

__all__ = [
    "NON_INTERACTIVE_ENV",
    "PASSED_ENV",
    "SandboxSpec",
    "SandboxStatus",
    "Switch",
    "child_environment",
    "describe",
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


def sandboxed(command: Sequence[str], spec: SandboxSpec) -> list[str]:
    """`command` confined as `spec` allows; only call when sandbox_status() is available.

    On macOS each call makes a fresh scratch dir for the command's TMPDIR. Nothing
    removes it when the command ends: it lives in the per-user temp dir, whose stale
    entries macOS purges by itself.
    """
    probe = _probe()
    if probe.launcher is None:
        raise RuntimeError(f"the sandbox is not available: {probe.reason}")
    if sys.platform == "darwin":
        scratch = Path(tempfile.mkdtemp(prefix="codewhale-sandbox-"))
        return [*seatbelt.seatbelt_arguments(probe.launcher, spec, scratch), *command]
    return [*bwrap.bwrap_arguments(probe.launcher, spec), "--", *command]


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
