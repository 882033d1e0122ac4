"""`/hooks`: the session's hooks, and `/hooks trust` for this project's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewhale.tui.hooks_trust import trusted_notice

if TYPE_CHECKING:
    from codewhale.tui.app import CodeWhaleApp


async def hooks_command(app: CodeWhaleApp, arguments: str) -> None:
    runtime = app.runtime
    assert runtime is not None  # the command needs a session
    word = arguments.strip()
    if word == "trust":
        await app.transcript.notice(trusted_notice(runtime.trust_hooks()))
        return
    if word:
        await app.transcript.notice("usage: /hooks [trust]", "error")
        return
    await app.transcript.notice("\n".join(runtime.hook_lines()))
