"""A project's hooks asked about once as its session opens, as a project's `.mcp.json` is:
each command listed, trusted for this workspace or left off for this run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewhale.hooks.listing import trust_details
from codewhale.hooks.trust import waiting_notice
from codewhale.tui.trust_screen import TrustQuestion, TrustScreen

if TYPE_CHECKING:
    from pathlib import Path

    from codewhale.hooks.settings import HookEntry
    from codewhale.runtime import Runtime
    from codewhale.tui.app import CodeWhaleApp


class HooksTrustScreen(TrustScreen):
    """Dismissed with True to trust the project's hooks (they run from then on), else False."""

    def __init__(self, entries: list[HookEntry], workspace: Path) -> None:
        super().__init__(
            kind="hooks",
            heading="This project's settings want to run hooks",
            paragraphs=[
                "Each command runs on your machine with your user's rights, outside the "
                "sandbox, at the event it names (PreToolUse: before each matching tool call), "
                "and may block what the agent does. Trusting is remembered for this workspace "
                "until a file changes them.",
                "Not now leaves them off for this session; you are asked again next time, "
                "and /hooks trust runs them.",
            ],
            # Text from a cloned repository: trust_details makes it safe to print.
            items=["\n".join(trust_details(entry, workspace)) for entry in entries],
            trust_label="Trust and run them",
        )
        self.entries = entries


def hooks_question(app: CodeWhaleApp, runtime: Runtime) -> TrustQuestion | None:
    """The dialog about the project's untrusted hooks; None when there are none."""
    untrusted = runtime.hooks_untrusted()
    if not untrusted:
        return None

    async def answered(trusted: bool) -> None:
        if not trusted:
            await app.transcript.notice("This project's hooks stay off for this session.")
            return
        try:
            count = runtime.trust_hooks()
        except OSError as error:
            await app.transcript.notice(f"Could not remember the trust: {error}", "error")
            return
        await app.transcript.notice(trusted_notice(count))

    return TrustQuestion(HooksTrustScreen(untrusted, runtime.workspace), answered)


def trusted_notice(count: int) -> str:
    return (
        f"Trusted {count} hook(s) of this project; they run from now on."
        if count
        else "No hook of this project is waiting for trust."
    )


def shown_warnings(runtime: Runtime) -> list[str]:
    """The session's warnings for the transcript, less the one the hooks dialog replaces."""
    replaced = waiting_notice(len(runtime.hooks_untrusted()))
    return [warning for warning in runtime.warnings if warning != replaced]
