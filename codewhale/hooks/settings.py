"""Where hooks are declared, read and checked: Claude Code's settings files and the
`[hooks]` table of CodeWhale's config, all in one shape.

    event name -> [ {matcher, hooks: [ {type: "command", command, timeout, statusMessage} ]} ]

A mistake is reported with its file and key, and only the entry at fault is skipped:
one typo must not silence every other hook. An event this app does not fire loads
and is listed as unused.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.hooks.matchers import Matcher, MatcherError
from codewhale.hooks.names import EMITTED, TOOL_EVENTS, HookEvent
from codewhale.rules.sources import claude_user_settings

DEFAULT_TIMEOUT_SECS = 60.0


@dataclass(frozen=True)
class HookFile:
    """One file hooks may come from; a project's file needs the user's trust."""

    path: Path
    project: bool

    @property
    def is_toml(self) -> bool:
        return self.path.suffix == ".toml"


@dataclass(frozen=True)
class HookEntry:
    """One command to run for one event, as declared."""

    event: str
    matcher: Matcher
    command: str
    timeout_secs: float
    status_message: str
    source: Path
    key: str  # where in the file, e.g. hooks.PreToolUse[0].hooks[1]
    project: bool

    @property
    def digest(self) -> str:
        """What trusting this entry pins: a changed command or matcher is asked about again."""
        text = json.dumps([str(self.source), self.event, self.matcher.text, self.command])
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def emitted(self) -> bool:
        return self.event in EMITTED


@dataclass
class LoadedHooks:
    entries: list[HookEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def hook_files(
    workspace: Path, user_config: Path, project_config: Path | None, env: Mapping[str, str]
) -> list[HookFile]:
    """Every file hooks are read from: the user's (trusted), then the project's."""
    files = [HookFile(claude_user_settings(env), False), HookFile(user_config, False)]
    files += [
        HookFile(workspace / ".claude" / "settings.json", True),
        HookFile(workspace / ".claude" / "settings.local.json", True),
    ]
    if project_config is not None:
        files.append(HookFile(project_config, True))
    return files


def load_hooks(files: list[HookFile]) -> LoadedHooks:
    loaded = LoadedHooks()
    for hook_file in files:
        section = _hooks_section(hook_file, loaded.problems)
        if section is not None:
            _read_section(hook_file, section, loaded)
    return loaded


def _hooks_section(hook_file: HookFile, problems: list[str]) -> Any:
    """The file's `hooks` value (None when the file or the key is missing or unreadable)."""
    path = hook_file.path
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{path}: cannot be read ({error}); its hooks are not loaded")
        return None
    try:
        document = tomllib.loads(raw) if hook_file.is_toml else json.loads(raw)
    except ValueError as error:
        language = "TOML" if hook_file.is_toml else "JSON"
        problems.append(
            f"{path}: not valid {language} ({error}); its hooks are not loaded until it is fixed"
        )
        return None
    if not isinstance(document, dict):
        problems.append(f"{path}: must hold a JSON object; its hooks are not loaded")
        return None
    return document.get("hooks")


def _read_section(hook_file: HookFile, section: Any, loaded: LoadedHooks) -> None:
    path = hook_file.path
    if not isinstance(section, dict):
        loaded.problems.append(
            f"{path}: 'hooks' must be an object of event name -> list of "
            '{"matcher": …, "hooks": [{"type": "command", "command": …}]}; ignored'
        )
        return
    for event, groups in section.items():
        if event not in EMITTED:
            close = difflib.get_close_matches(event, list(HookEvent), n=1)
            if close:
                loaded.problems.append(
                    f"{path}: hooks.{event} is not an event this app fires; "
                    f"did you mean {close[0]}? (loaded, never run)"
                )
        if not isinstance(groups, list):
            loaded.problems.append(
                f"{path}: hooks.{event} must be a list of matcher groups; ignored"
            )
            continue
        for index, group in enumerate(groups):
            loaded.entries += _read_group(hook_file, event, index, group, loaded.problems)


def _read_group(
    hook_file: HookFile, event: str, index: int, group: Any, problems: list[str]
) -> list[HookEntry]:
    path, key = hook_file.path, f"hooks.{event}[{index}]"
    if not isinstance(group, dict):
        problems.append(f"{path}: {key} must be an object with 'matcher' and 'hooks'; ignored")
        return []
    matcher_text = group.get("matcher", "")
    if not isinstance(matcher_text, str):
        problems.append(f"{path}: {key}.matcher must be a string; the group is ignored")
        return []
    try:
        matcher = Matcher.parse(matcher_text, tools=event in TOOL_EVENTS)
    except MatcherError as error:
        problems.append(f"{path}: {key}.matcher {error}; the group is ignored")
        return []
    handlers = group.get("hooks")
    if not isinstance(handlers, list):
        problems.append(
            f"{path}: {key}.hooks must be a list of "
            '{"type": "command", "command": …}; the group is ignored'
        )
        return []
    entries = []
    for number, handler in enumerate(handlers):
        where = f"{key}.hooks[{number}]"
        entry = _read_handler(hook_file, event, matcher, where, handler, problems)
        if entry is not None:
            entries.append(entry)
    return entries


def _read_handler(
    hook_file: HookFile, event: str, matcher: Matcher, key: str, handler: Any, problems: list[str]
) -> HookEntry | None:
    path = hook_file.path
    if not isinstance(handler, dict):
        problems.append(f"{path}: {key} must be an object; ignored")
        return None
    kind = handler.get("type", "command")
    if kind != "command":
        problems.append(f'{path}: {key}.type is {kind!r}; only "command" hooks run here; ignored')
        return None
    command = handler.get("command")
    if not isinstance(command, str) or not command.strip():
        problems.append(f"{path}: {key}.command must be a non-empty string; ignored")
        return None
    timeout = handler.get("timeout", DEFAULT_TIMEOUT_SECS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(f"{path}: {key}.timeout must be a positive number of seconds; ignored")
        return None
    status = handler.get("statusMessage", "")
    if not isinstance(status, str):
        problems.append(f"{path}: {key}.statusMessage must be a string; ignored")
        return None
    return HookEntry(
        event=event,
        matcher=matcher,
        command=command,
        timeout_secs=float(timeout),
        status_message=status,
        source=path,
        key=key,
        project=hook_file.project,
    )
