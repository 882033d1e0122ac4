"""Every file location CodeWhale uses, computed in one place (no I/O here)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

APP_NAME = "codewhale"


@dataclass(frozen=True)
class UserDirs:
    """Per-user directories: platform defaults, or all under CODEWHALE_HOME."""

    config_dir: Path
    data_dir: Path
    state_dir: Path
    cache_dir: Path


def user_dirs(env: Mapping[str, str] | None = None) -> UserDirs:
    """The user dirs for this environment; CODEWHALE_HOME relocates all four."""
    env = os.environ if env is None else env
    home = env.get("CODEWHALE_HOME", "").strip()
    if home:
        root = Path(home).expanduser()
        return UserDirs(root / "config", root / "data", root / "state", root / "cache")
    import platformdirs

    return UserDirs(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_state_dir(APP_NAME)),
        Path(platformdirs.user_cache_dir(APP_NAME)),
    )


def user_config_file(dirs: UserDirs) -> Path:
    return dirs.config_dir / "config.toml"


def memory_file(dirs: UserDirs) -> Path:
    return dirs.data_dir / "memory.md"


def user_agents_dir(dirs: UserDirs) -> Path:
    return dirs.config_dir / "agents"


def claude_home(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's per-user directory, whose agents and CLAUDE.md we read.

    `~/.claude`, or where CLAUDE_CONFIG_DIR points, as Claude Code itself reads it.
    """
    env = os.environ if env is None else env
    if relocated := env.get("CLAUDE_CONFIG_DIR", "").strip():
        return Path(relocated).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".claude"


def agent_definition_dirs(workspace: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Where agent definition files live, strongest first (spec §1.1)."""
    paths = WorkspacePaths(workspace)
    return [
        paths.agents_dir,
        paths.root / ".claude" / "agents",
        user_agents_dir(user_dirs(env)),
        claude_home(env) / "agents",
    ]


def skill_dirs(workspace: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Where skills (`<name>/SKILL.md`) live, strongest first, beside the agent files."""
    root = Path(workspace).resolve()
    return [
        root / ".codewhale" / "skills",
        root / ".claude" / "skills",
        user_dirs(env).config_dir / "skills",
        claude_home(env) / "skills",
    ]


@dataclass(frozen=True)
class WorkspacePaths:
    """Locations inside one workspace's `.codewhale/` directory."""

    root: Path
    dot_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())
        object.__setattr__(self, "dot_dir", self.root / ".codewhale")

    @property
    def config_file(self) -> Path:
        return self.dot_dir / "config.toml"

    @property
    def state_dir(self) -> Path:
        return self.dot_dir / "state"

    @property
    def subagents_state_file(self) -> Path:
        return self.state_dir / "subagents.v1.json"

    @property
    def transcripts_dir(self) -> Path:
        return self.state_dir / "subagent-transcripts"

    @property
    def agents_dir(self) -> Path:
        return self.dot_dir / "agents"

    @property
    def handoff_file(self) -> Path:
        return self.dot_dir / "handoff.md"
