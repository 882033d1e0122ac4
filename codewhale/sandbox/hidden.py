"""The paths a sandboxed process must not see: the app's directories and common secrets."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from codewhale.paths import UserDirs, user_dirs

# Credentials under the user's home that no command of ours needs.
SECRET_HOME_PATHS = (".ssh", ".aws", ".gnupg", ".netrc", ".config/gh")
# Sockets that reach services outside the sandbox: the Docker daemon is root on the host.
SERVICE_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock")


def hidden_paths(workspace: Path, extra: Iterable[str], env: Mapping[str, str]) -> tuple[Path, ...]:
    """The existing paths a command must not see, resolved.

    The app's own config, data and state dirs, the credentials in SECRET_HOME_PATHS,
    the user's runtime dir (session bus, ssh and gpg agents), the Docker socket, and
    `extra` (`~` expanded, relative to the workspace). A path that is or holds the
    workspace is left visible: hiding it would hide the work itself. On Linux, paths
    under /tmp outside the workspace are already hidden by bwrap's private /tmp; macOS
    has no private /tmp, so there they are hidden like any other.
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
