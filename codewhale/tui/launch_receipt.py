"""A receipt for start-up checks that passed, so an unchanged setup paints at once.

`codewhale` refuses a bad config or a missing key before the full-screen app appears.
Reading and validating the config takes about 40 ms of CPU (its modules, tomllib,
the checks), a sixth of a bare Textual app's whole start. When the checks pass, a
digest of everything they read is kept (with the two settings the first frame needs);
the next start whose digest matches skips them, paints, and reads the config with the
session after the first frame.

With the digest goes the status line a new session showed when it last opened with this
setup (mode, model, sandbox, context use; `OpeningStatus`), so the next start draws it
in its first frame: the screen is then as it stays, and the session opens behind it.
A resumed session's line is kept too, for what it shares with the setup (mode, model,
sandbox, the window and the tool schemas' share of the context): `--continue` draws its
status line with the conversation read from the file, before the session opens.
A start that misses (a changed config) draws the status line the workspace's last
session opened with, if the config just read names the same model: most changes leave
it as it was, and one that does not is redrawn when the session opens.

The digest covers what the checks read: the config files (by size and mtime), the
environment variables the config loader and the key check look at (`CODEWHALE_*`,
`DEEPSEEK_*` and every provider's key variable, see `checked_environment`), the flags,
the workspace, the Python and CodeWhale versions, the newest source file's mtime and
whether the offline model is installed: anything that could change the answer misses
and the checks run in full. Nothing else in the environment enters it, so a new tmux
pane or terminal window (TMUX_PANE, WINDOWID, TERM_SESSION_ID...) still hits. The
receipt file (mode 0600) holds digests, those two settings, the status line and the
workspace's path, never another input's value.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from codewhale import __version__
from codewhale.atomic import atomic_write_text
from codewhale.paths import WorkspacePaths, user_config_file, user_dirs
from codewhale.permissions import Mode
from codewhale.providers.local_model import missing_local_runtime, status_limits
from codewhale.providers.presets import PRESETS
from codewhale.secret_names import secret_name

if TYPE_CHECKING:
    from hashlib import sha256

    from codewhale.config import LoadedConfig
    from codewhale.runtime import Runtime
else:
    # Python's own SHA-256, the same digest: hashlib loads OpenSSL first, 2 ms of each start.
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python 3.12 on
        except ImportError:  # a build without it
            from hashlib import sha256

RECEIPT_FILE = "launch-checks.json"
# A receipt's keys for the status lines a new and a resumed session opened with.
NEW, RESUMED = "status", "resumed"
# Workspaces and setups remembered at once; the oldest is dropped first.
KEEP = 16
# The environment the config loader (config.py: CODEWHALE_HOME, CODEWHALE_PROVIDER,
# CODEWHALE_MODEL, DEEPSEEK_BASE_URL, ...) and the key check read: whole prefixes, so a
# variable the loader learns to read later is covered without a change here.
CHECKED_PREFIXES = ("CODEWHALE_", "DEEPSEEK_")
# Each provider's own key variable (OPENAI_API_KEY, ...): the key check asks if it is set.
KEY_VARIABLES = frozenset(preset.key_env for preset in PRESETS.values() if preset.key_env)
PACKAGE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class OpeningStatus:
    """What the status line says once a new session has opened, before any turn (its
    counters are zero then): what the status line takes from the runtime."""

    mode: Mode
    model: str
    limits: str | None  # the offline model's, when it answers
    sandboxed: bool
    context: tuple[int, int]  # (tokens the first request carries, the model's window)
    # The tool schemas' share of those tokens (None: a receipt from before it was kept).
    tools: int | None = None

    @classmethod
    def of(cls, runtime: Runtime) -> OpeningStatus:
        settings = runtime.settings
        tokens, window = runtime.context_use()
        return cls(
            mode=runtime.mode,
            model=runtime.model,
            limits=status_limits(settings.provider, settings.offer_tools),
            sandboxed=runtime.sandboxed,
            context=(tokens, window),
            tools=runtime.tools_context(),
        )

    @classmethod
    def from_json(cls, data: object) -> OpeningStatus | None:
        """As `remember_opening_status` wrote it; None for anything else."""
        if not isinstance(data, dict):
            return None
        model, limits, sandboxed = data.get("model"), data.get("limits"), data.get("sandboxed")
        context, tools = data.get("context"), data.get("tools")
        if not (
            isinstance(model, str)
            and (limits is None or isinstance(limits, str))
            and isinstance(sandboxed, bool)
            and isinstance(context, list)
            and len(context) == 2
            and all(type(number) is int for number in context)
        ):
            return None
        try:
            mode = Mode(str(data.get("mode")))
        except ValueError:
            return None
        known_tools = tools if type(tools) is int else None  # missing: not guessed from
        return cls(mode, model, limits, sandboxed, (context[0], context[1]), known_tools)


@dataclass(frozen=True)
class Appearance:
    """What the first frame takes from the config, and from the last new and resumed
    session opened with it (None until one has opened)."""

    theme: str
    sidebar: bool
    status: OpeningStatus | None = None
    resumed: OpeningStatus | None = None

    def for_resume(self) -> OpeningStatus | None:
        """The status line a resumed session's is drawn from, before it opens: the last
        resumed session's, else a new one's, where it says the tool schemas' share."""
        for status in (self.resumed, self.status):
            if status is not None and status.tools is not None:
                return status
        return None

    @classmethod
    def of(cls, loaded: LoadedConfig) -> Appearance:
        return cls(theme=loaded.config.tui.theme, sidebar=loaded.config.tui.sidebar)

    @classmethod
    def guessed(cls, loaded: LoadedConfig) -> Appearance:
        """As `of`, with the status lines a new and a resumed session in this workspace
        last opened with, when the config just read names the same model and limits."""
        return replace(
            cls.of(loaded), status=_last_status(loaded), resumed=_last_status(loaded, RESUMED)
        )


def digest(
    workspace: Path, overrides: Mapping[str, str], env: Mapping[str, str] | None = None
) -> str:
    """One hash of everything the config and key checks read for this start.

    Secrets never enter it, not even hashed: a variable that looks like one counts only
    as set or unset (the key check asks no more), and the config files by their size and
    modification time rather than their bytes (they may hold `api_key`).
    """
    env = os.environ if env is None else env
    dirs = user_dirs(env)
    files = []
    for path in (user_config_file(dirs), WorkspacePaths(workspace).config_file):
        try:
            info = path.stat()
            files.append((str(path), info.st_size, info.st_mtime_ns))
        except OSError:
            files.append((str(path), -1, -1))  # a missing file is part of the answer too
    inputs = {
        "python": sys.version,
        "codewhale": __version__,
        "source": _newest_source(PACKAGE),
        "workspace": str(workspace),
        "flags": sorted(overrides.items()),
        "env": checked_environment(env),
        "config files": files,
        "offline model": missing_local_runtime(),
    }
    return sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def checked_environment(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The variables the config and key checks read, sorted; one that looks like a secret
    only as set or unset (the key check asks no more)."""
    return sorted(
        (name, "<set>" if secret_name(name) and value else value)
        for name, value in env.items()
        if name.startswith(CHECKED_PREFIXES) or name in KEY_VARIABLES
    )


def recall(key: str, state_dir: Path) -> Appearance | None:
    """The first frame's settings if checks with this digest passed before."""
    entry = _receipts(state_dir).get(key)
    if not isinstance(entry, dict):
        return None
    theme, sidebar = entry.get("theme"), entry.get("sidebar")
    if not isinstance(theme, str) or not isinstance(sidebar, bool):
        return None
    return Appearance(
        theme=theme,
        sidebar=sidebar,
        status=OpeningStatus.from_json(entry.get(NEW)),
        resumed=OpeningStatus.from_json(entry.get(RESUMED)),
    )


def remember(key: str, state_dir: Path, appearance: Appearance, workspace: Path) -> None:
    """Keep this digest as passed; a write that fails only costs the next start its check."""
    receipts = _receipts(state_dir)
    receipts.pop(key, None)
    receipts[key] = {**asdict(appearance), "workspace": str(workspace)}
    kept = dict(list(receipts.items())[-KEEP:])
    with contextlib.suppress(OSError):
        atomic_write_text(state_dir / RECEIPT_FILE, json.dumps(kept))


def remember_opening_status(
    workspace: Path, overrides: Mapping[str, str], status: OpeningStatus, *, resumed: bool = False
) -> None:
    """Keep what a new (or `resumed`) session's status line said, with the receipt for its
    setup: only one whose checks passed (a setup without a receipt is checked before it
    paints)."""
    state_dir = user_dirs().state_dir
    receipts = _receipts(state_dir)
    entry = receipts.get(digest(workspace, overrides))
    shown = json.loads(json.dumps(asdict(status)))  # as read back: the tuple as a list
    kind = RESUMED if resumed else NEW
    if not isinstance(entry, dict) or entry.get(kind) == shown:
        return
    entry[kind] = shown
    with contextlib.suppress(OSError):
        atomic_write_text(state_dir / RECEIPT_FILE, json.dumps(receipts))


def _last_status(loaded: LoadedConfig, kind: str = NEW) -> OpeningStatus | None:
    """The newest status line of a `kind` session remembered for `loaded`'s workspace, if
    it names the model and limits this config opens with (mode, sandbox and context use
    are as likely)."""
    if loaded.workspace is None:
        return None
    settings = loaded.provider_settings()
    limits = status_limits(settings.provider, settings.offer_tools)
    for entry in reversed(_receipts(user_dirs().state_dir).values()):
        if isinstance(entry, dict) and entry.get("workspace") == str(loaded.workspace):
            status = OpeningStatus.from_json(entry.get(kind))
            if status is not None and (status.model, status.limits) == (settings.model, limits):
                return status
    return None


def _receipts(state_dir: Path) -> dict[str, object]:
    try:
        data = json.loads((state_dir / RECEIPT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _newest_source(root: Path) -> int:
    """The newest mtime of the package's .py files: an edited checkout is new code."""
    newest = 0
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
    return newest
