"""The session's hooks as text: `/hooks` and `codewhale hooks list`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from codewhale.hooks.settings import HookEntry
from codewhale.sanitize import clean_line, clean_text


def hook_lines(entries: list[HookEntry], trusted: Callable[[HookEntry], bool]) -> list[str]:
    """One block per source file: event, matcher, command, and whether it runs."""
    if not entries:
        return [
            "No hooks. Declare them in ~/.claude/settings.json, .claude/settings.json or "
            "a [hooks] table of the config (docs/HOOKS.md)."
        ]
    lines: list[str] = []
    unused: list[str] = []
    for source in dict.fromkeys(entry.source for entry in entries):
        lines.append(f"{source}:")
        for entry in (e for e in entries if e.source == source):
            # Text from a cloned repository: cleaned before it reaches a terminal.
            matcher = clean_text(entry.matcher.text) or "*"
            note = "" if trusted(entry) else "  [not trusted: does not run]"
            if not entry.emitted:
                note = "  [unused: this app never fires it]"
                unused.append(clean_text(entry.event))
            lines.append(
                f"  {clean_text(entry.event)} [{matcher}] "
                f"{clean_text(entry.command)} (timeout {entry.timeout_secs:g} s){note}"
            )
    if unused:
        lines.append(f"Unused events: {', '.join(dict.fromkeys(unused))}")
    return lines


def trust_details(entry: HookEntry, workspace: Path) -> list[str]:
    """The trust prompt's lines for one hook, safe to print (the text comes from a repository)."""
    source = entry.source
    if source.is_relative_to(workspace):
        source = source.relative_to(workspace)
    return [
        clean_line(f"{entry.event} [{entry.matcher.text or '*'}]  from {source}"),
        clean_line(f"  runs: {entry.command}"),
    ]
