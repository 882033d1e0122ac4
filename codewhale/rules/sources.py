"""The files permission rules come from, read and edited in place.

CodeWhale's own config (`[permissions] allow/ask/deny`, user and project) and Claude
Code's settings (`~/.claude/settings.json` or `$CLAUDE_CONFIG_DIR/settings.json`, and the
project's `.claude/settings.json` and `.claude/settings.local.json`). A project is a
cloned repository: its files may add `ask` and `deny` rules, never silently an `allow`
(that would let a repository run commands unasked). A project Claude file's allow rule
applies once the user has approved that very rule in this workspace ("always in this
project" does so); a project TOML config's allow is ignored with a warning. Other
settings keys (`model`, `env`, `defaultMode`, …) are ignored without a word: in
particular `defaultMode: "bypassPermissions"` never changes the mode.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from codewhale.atomic import atomic_write_text
from codewhale.config_write import update_config_file
from codewhale.digest_trust import DigestTrustStore
from codewhale.rules.rule import Effect, Rule, RuleSyntaxError, parse_rule

# What a trusted project allow rule is remembered with (the rule's text is its name).
_TRUSTED = "allow"
_UNTRUSTED = "a project's allow rule applies once you approve it"


class FileKind(StrEnum):
    TOML = "toml"  # CodeWhale's config.toml, [permissions]
    CLAUDE = "claude"  # Claude Code's settings.json, "permissions"


@dataclass(frozen=True)
class RuleFile:
    """One file rules may come from."""

    path: Path
    kind: FileKind
    # A project's file: its allow rules need the user's approval (see the module note).
    project: bool


@dataclass
class LoadedRules:
    """The rules in force, those set aside (with why), and what went wrong reading."""

    rules: list[Rule] = field(default_factory=list)
    ignored: list[tuple[Rule, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class RuleFileError(Exception):
    """A rule file that cannot be changed; the message names it and what to do."""


def claude_user_settings(env: Mapping[str, str]) -> Path:
    """Claude Code's user settings file, honouring CLAUDE_CONFIG_DIR as Claude Code does."""
    configured = env.get("CLAUDE_CONFIG_DIR", "").strip()
    folder = Path(configured).expanduser() if configured else Path.home() / ".claude"
    return folder / "settings.json"


def project_local_settings(workspace: Path) -> Path:
    """Where "always in this project" writes: the project's personal Claude settings."""
    return workspace / ".claude" / "settings.local.json"


def rule_files(
    workspace: Path, user_config: Path, project_config: Path | None, env: Mapping[str, str]
) -> list[RuleFile]:
    """Every file rules are read from, the user's first."""
    files = [
        RuleFile(user_config, FileKind.TOML, project=False),
        RuleFile(claude_user_settings(env), FileKind.CLAUDE, project=False),
    ]
    if project_config is not None:
        files.append(RuleFile(project_config, FileKind.TOML, project=True))
    files += [
        RuleFile(workspace / ".claude" / "settings.json", FileKind.CLAUDE, project=True),
        RuleFile(project_local_settings(workspace), FileKind.CLAUDE, project=True),
    ]
    return files


def trust_store(state_dir: Path) -> DigestTrustStore:
    """Which project allow rules the user approved, per workspace."""
    return DigestTrustStore(state_dir / "permission-trust.json")


def trusted_allows(store: DigestTrustStore, workspace: Path) -> set[str]:
    """The project allow rules (by text) the user approved in this workspace."""
    return {name for name, value in store.remembered(workspace).items() if value == _TRUSTED}


def trust_allow(store: DigestTrustStore, workspace: Path, text: str) -> None:
    store.trust(workspace, {text: _TRUSTED})


def load_rules(
    files: list[RuleFile], root: Path, trusted: Collection[str], home: Path | None = None
) -> LoadedRules:
    """The rules of `files`; a project allow rule applies only if its text is `trusted`."""
    home = home or Path.home()
    loaded = LoadedRules()
    for rule_file in files:
        texts = _rule_texts(rule_file, loaded.warnings)
        for effect, text in texts:
            try:
                rule = parse_rule(text, effect, rule_file.path, root, home)
            except RuleSyntaxError as error:
                loaded.warnings.append(f"{rule_file.path}: {error} (rule ignored)")
                continue
            why = _set_aside(rule_file, rule, trusted)
            if not why:
                loaded.rules.append(rule)
                continue
            loaded.ignored.append((rule, why))
            if rule_file.kind is FileKind.TOML:
                loaded.warnings.append(
                    f"{rule_file.path}: allow rule '{rule.text}' is ignored in a project "
                    "config: a cloned repository must not let commands run unasked. "
                    "Put it in your user config instead."
                )
    untrusted = [rule.text for rule, why in loaded.ignored if why == _UNTRUSTED]
    if untrusted:
        loaded.warnings.append(
            f"{len(untrusted)} allow rule(s) in this project's files are not applied "
            f"({', '.join(untrusted[:3])}{', …' if len(untrusted) > 3 else ''}): a project may "
            "only add ask and deny rules. Approve a call with “always in this project”, or "
            "put the rule in your user settings; /permissions lists them."
        )
    return loaded


def _set_aside(rule_file: RuleFile, rule: Rule, trusted: Collection[str]) -> str:
    """Why a rule is not applied ('' when it is)."""
    if rule.effect is not Effect.ALLOW or not rule_file.project:
        return ""
    if rule_file.kind is FileKind.TOML:
        return "a project config may not add allow rules"
    return "" if rule.text in trusted else _UNTRUSTED


def _rule_texts(rule_file: RuleFile, warnings: list[str]) -> list[tuple[Effect, str]]:
    """(effect, text) of each rule in the file; a damaged file warns and gives none."""
    try:
        raw = rule_file.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as error:
        warnings.append(f"{rule_file.path}: cannot be read ({error.strerror}); its rules ignored")
        return []
    try:
        document: Any = json.loads(raw) if rule_file.kind is FileKind.CLAUDE else tomllib.loads(raw)
    except ValueError as error:
        language = "JSON" if rule_file.kind is FileKind.CLAUDE else "TOML"
        warnings.append(
            f"{rule_file.path}: not valid {language} ({error}); "
            "its permission rules are ignored until it is fixed"
        )
        return []
    section = document.get("permissions") if isinstance(document, dict) else None
    if section is None:
        return []
    if not isinstance(section, dict):
        warnings.append(f"{rule_file.path}: 'permissions' must be a table/object; ignored")
        return []
    found = []
    for effect in Effect:
        values = section.get(effect.value, [])
        if not isinstance(values, list):
            warnings.append(
                f"{rule_file.path}: permissions.{effect} must be a list of rule strings; ignored"
            )
            continue
        for value in values:
            if isinstance(value, str):
                found.append((effect, value))
            else:
                warnings.append(
                    f"{rule_file.path}: permissions.{effect} holds {value!r}, not a rule string"
                    "; ignored"
                )
    return found


def add_claude_rule(path: Path, effect: Effect, text: str) -> None:
    """Add `text` to the `permissions.<effect>` list of the Claude settings file at `path`,
    keeping every other key; the file is created 0600 if missing."""
    document = _claude_document(path)
    permissions = document.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise RuleFileError(f"{path}: 'permissions' is not an object; fix it by hand first")
    values = permissions.setdefault(effect.value, [])
    if not isinstance(values, list):
        raise RuleFileError(f"{path}: permissions.{effect} is not a list; fix it by hand first")
    if text not in values:
        values.append(text)
    folder = path.parent
    if folder.is_symlink():
        # A repository's `.claude` link could point the write anywhere.
        raise RuleFileError(f"{folder} is a symbolic link; the rule was not written")
    atomic_write_text(path, json.dumps(document, indent=2) + "\n")


def remove_rule(rule: Rule) -> None:
    """Take `rule` out of the file it came from (other rules and keys stay as they are)."""
    path = rule.source
    if path.suffix == ".toml":
        document = tomllib.loads(path.read_text(encoding="utf-8"))
        values = document.get("permissions", {}).get(rule.effect.value, [])
        kept = [value for value in values if value != rule.text]
        update_config_file(path, {"permissions": {rule.effect.value: kept}})
        return
    document = _claude_document(path)
    permissions = document.get("permissions")
    values = permissions.get(rule.effect.value) if isinstance(permissions, dict) else None
    if not isinstance(values, list) or rule.text not in values:
        raise RuleFileError(f"{path} no longer holds {rule.effect} rule '{rule.text}'")
    values.remove(rule.text)
    atomic_write_text(path, json.dumps(document, indent=2) + "\n")


def _claude_document(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        document = json.loads(raw)
    except ValueError as error:
        raise RuleFileError(f"{path} is not valid JSON ({error}); fix it by hand first") from None
    if not isinstance(document, dict):
        raise RuleFileError(f"{path} does not hold a JSON object; fix it by hand first")
    return document
