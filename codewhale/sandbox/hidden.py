"""The paths a sandboxed process must not see: the app's directories and common secrets."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from codewhale.paths import UserDirs, claude_home, user_dirs

# Credentials under the user's home that no command of ours needs.
SECRET_HOME_PATHS = (
    # Keys and tokens for machines and clouds.
    ".ssh",
    ".gnupg",
    ".netrc",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".config/containers/auth.json",
    # Git and forge logins: credential-store files, credential-cache daemon sockets, gh.
    ".git-credentials",
    ".config/git/credentials",
    ".git-credential-cache",
    ".cache/git/credential",
    ".config/gh",
    # Publish tokens of package registries.
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".gem/credentials",
    # Claude Code: OAuth tokens in .claude/.credentials.json, beside its settings, agents,
    # skills and transcripts; account data and MCP servers' settings in .claude.json.
    # The app reads agent definitions there itself, unsandboxed; commands need none of it.
    ".claude",
    ".claude.json",
)
# Sockets that reach services outside the sandbox: the Docker daemon is root on the host.
SERVICE_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock")
# Where services keep their sockets, hidden from offline commands where no seccomp filter
# keeps them off Unix sockets altogether (under /tmp, Linux's private /tmp hides them).
SOCKET_DIRS = ("/run", "/var/run", "/tmp/.X11-unix")


def hidden_paths(workspace: Path, extra: Iterable[str], env: Mapping[str, str]) -> tuple[Path, ...]:
    """The existing paths a command must not see, resolved.

    The app's own config, data and state dirs, the credentials in SECRET_HOME_PATHS
    and Claude Code's directory wherever it is, the user's runtime dir (session bus,
    ssh and gpg agents), the Docker socket, and `extra` (`~` expanded, relative to the
    workspace). A path that is or holds the workspace is left visible: hiding it would
    hide the work itself. On Linux, paths under /tmp outside the workspace are already
    hidden by bwrap's private /tmp; macOS has no private /tmp, so there they are hidden
    like any other.
    """
    workspace = workspace.resolve()
    home = Path(env.get("HOME") or Path.home())
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    candidates = [
        *_app_dirs(user_dirs(env)),
        # The platform's defaults too: CODEWHALE_HOME moves ours, not a config left there.
        *_app_dirs(user_dirs({})),
        *(home / name for name in SECRET_HOME_PATHS),
        # Claude Code's directory where CLAUDE_CONFIG_DIR moves it (tokens included).
        claude_home(env),
        Path(runtime),
        *map(Path, SERVICE_SOCKETS),
        *(workspace / Path(raw).expanduser() for raw in extra),
    ]
    return _worth_hiding(workspace, candidates)


def socket_dirs(workspace: Path) -> tuple[Path, ...]:
    """The SOCKET_DIRS to hide from an offline command in `workspace`, as hidden_paths() would."""
    return _worth_hiding(workspace.resolve(), map(Path, SOCKET_DIRS))


def _worth_hiding(workspace: Path, candidates: Iterable[Path]) -> tuple[Path, ...]:
    """The existing `candidates`, resolved, less those the workspace needs or /tmp hides."""
    private_tmp = Path("/tmp").resolve() if sys.platform.startswith("linux") else None
    hidden: list[Path] = []
    for candidate in candidates:
        path = Path(os.path.realpath(candidate))
        if (
            path in hidden
            or not path.exists()
            or workspace.is_relative_to(path)
            or (
                private_tmp is not None
                and path.is_relative_to(private_tmp)
                and not path.is_relative_to(workspace)
            )
        ):
            continue
        hidden.append(path)
    return tuple(hidden)


def _app_dirs(dirs: UserDirs) -> tuple[Path, ...]:
    return (dirs.config_dir, dirs.data_dir, dirs.state_dir)
