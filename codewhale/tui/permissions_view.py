"""`/permissions`: the lasting allow/ask/deny rules with the file each comes from; removes one.

`/permissions` lists them numbered, `/permissions remove N` takes rule N out of its file
(a Claude settings file or CodeWhale's config.toml) and stops applying it at once, in the
parent and in every child.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from codewhale.rules.rule import Effect, Rule
from codewhale.rules.sources import RuleFileError

if TYPE_CHECKING:
    from codewhale.rules.ruleset import PermissionRules
    from codewhale.tui.app import CodeWhaleApp

USAGE = "usage: /permissions, or /permissions remove N (N as listed)"


async def permissions_command(app: CodeWhaleApp, arguments: str) -> None:
    assert app.runtime is not None  # a command that needs a session
    rules = app.runtime.permission_rules
    words = arguments.split()
    if not words:
        await app.transcript.notice(listing(rules, app.runtime.tool_names, app.runtime.workspace))
        return
    if len(words) != 2 or words[0] != "remove" or not words[1].isdigit():
        await app.transcript.notice(USAGE, "error")
        return
    ordered = in_order(rules.rules)
    number = int(words[1])
    if not 1 <= number <= len(ordered):
        await app.transcript.notice(
            f"there is no rule {number}: /permissions lists {len(ordered)}", "error"
        )
        return
    rule = ordered[number - 1]
    try:
        rules.remove(rule)
    except (RuleFileError, OSError) as error:
        await app.transcript.notice(f"rule {number} was not removed: {error}", "error")
        return
    await app.transcript.notice(f"Removed {rule.effect} rule {rule.text} from {rule.source}.")


def in_order(rules: list[Rule]) -> list[Rule]:
    """Deny first, then ask, then allow: the order they are applied in."""
    rank = {Effect.DENY: 0, Effect.ASK: 1, Effect.ALLOW: 2}
    return sorted(rules, key=lambda rule: rank[rule.effect])


def listing(rules: PermissionRules, available: frozenset[str], workspace: Path) -> str:
    """The numbered rules with their files, those not applied, and the unknown tools."""
    ordered = in_order(rules.rules)
    if not ordered and not rules.loaded.ignored:
        return (
            "No permission rules. Add them under [permissions] in your config or in "
            ".claude/settings.json (see docs/PERMISSIONS.md)."
        )
    lines = ["Permission rules (deny beats ask beats allow):"]
    width = max((len(rule.text) for rule in ordered), default=0)
    for number, rule in enumerate(ordered, 1):
        unknown = "" if rule.known(available) else "  ⚠ no such tool here: matches nothing"
        where = _shown(rule.source, workspace)
        lines.append(f"  {number:>2}. {rule.effect:<5}  {rule.text:<{width}}  {where}{unknown}")
    if rules.loaded.ignored:
        lines.append("Not applied:")
        for rule, why in rules.loaded.ignored:
            lines.append(f"  - {rule.effect} {rule.text}  {_shown(rule.source, workspace)}: {why}")
    lines.append("Remove one with /permissions remove N.")
    return "\n".join(lines)


def _shown(path: Path, workspace: Path) -> str:
    """A rule file as short as it reads unambiguously: relative inside the workspace."""
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)
