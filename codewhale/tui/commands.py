"""Slash commands: one registry of names, aliases, help and handlers."""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import Hit, Hits, Provider

if TYPE_CHECKING:
    from codewhale.tui.app import CodeWhaleApp

Handler = Callable[["CodeWhaleApp", str], Awaitable[None]]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    help: str
    handler: Handler
    aliases: tuple[str, ...] = ()
    usage: str = ""
    # Most commands act on the open session; when it failed to open they say so instead.
    needs_session: bool = True


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, SlashCommand] = {}
        self._lookup: dict[str, SlashCommand] = {}

    def add(self, command: SlashCommand) -> None:
        self._commands[command.name] = command
        for name in (command.name, *command.aliases):
            self._lookup[name] = command

    def commands(self) -> list[SlashCommand]:
        return list(self._commands.values())

    def find(self, name: str) -> SlashCommand | None:
        return self._lookup.get(name.lower())

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._lookup), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join('/' + c for c in close)}?" if close else ""
        return f"Unknown command /{name}.{hint} Type /help for the list."


def split_command(text: str) -> tuple[str, str]:
    """('agent', '2 fix the bug') from '/agent 2 fix the bug'; inner spacing is kept."""
    body = text.strip()[1:]
    name, _, arguments = body.partition(" ")
    return name.strip(), arguments


class SlashCommandProvider(Provider):
    """Slash commands in Textual's command palette (Ctrl+P): picking one fills the composer."""

    async def search(self, query: str) -> Hits:
        from codewhale.tui.app import CodeWhaleApp  # a cycle at import time; loaded by now

        matcher = self.matcher(query.lstrip("/"))
        app = self.app
        if not isinstance(app, CodeWhaleApp):  # the provider is registered on CodeWhaleApp only
            return
        for command in app.registry.commands():
            score = matcher.match(command.name)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(f"/{command.name}"),
                    partial(app.fill_composer, f"/{command.name} "),
                    help=command.help,
                )
