"""MCP servers in the app: started once a session has opened, a project's `.mcp.json` asked
about once, and `/mcp` to see them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewhale.mcp.disclosure import trust_details
from codewhale.mcp.listing import format_statuses
from codewhale.tui.trust_screen import TrustQuestion, TrustScreen, ask_in_turn

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from textual.worker import Worker

    from codewhale.mcp.specs import ServerSpec
    from codewhale.runtime import Runtime
    from codewhale.tui.app import CodeWhaleApp


class McpTrustScreen(TrustScreen):
    """Dismissed with True to trust (and start) the project's servers, False to leave them."""

    def __init__(self, specs: list[ServerSpec]) -> None:
        super().__init__(
            kind="mcp",
            heading="This project's .mcp.json wants to start MCP servers",
            paragraphs=[
                "They run as programs on your machine (or are reached over HTTP) with your "
                "user's rights, and their tools are offered to the model; each call still "
                "asks for approval in Agent mode. Trusting is remembered for this workspace "
                "until the file changes them.",
                "A project's server is never given your API key or a secret-looking "
                "variable; other ${VAR}s only if your user config lists them in "
                "[mcp] project_env.",
            ],
            # Text from a cloned repository: trust_details makes it safe to print.
            items=["\n".join(trust_details(spec)) for spec in specs],
            trust_label="Trust and start",
        )
        self.specs = specs


def start_servers(app: CodeWhaleApp, runtime: Runtime) -> Worker[None]:
    """A session has opened: start its servers in a worker, and say which did not come up
    (untrusted project ones wait for `trust_question`'s answer)."""

    async def start() -> None:
        await _report(app, runtime, await runtime.start_mcp())

    return _in_worker(app, start)


def ask_trust(app: CodeWhaleApp, runtime: Runtime) -> bool:
    """Ask about the project's untrusted servers; False when there are none."""
    question = trust_question(app, runtime)
    ask_in_turn(app, [question])
    return question is not None


def trust_question(app: CodeWhaleApp, runtime: Runtime) -> TrustQuestion | None:
    """The dialog about the project's untrusted servers; None when there are none."""
    untrusted = runtime.mcp_untrusted()
    if not untrusted:
        return None

    async def trust() -> None:
        try:
            names = runtime.trust_mcp()
        except OSError as error:
            await app.transcript.notice(f"Could not remember the trust: {error}", "error")
            return
        await app.transcript.notice(
            f"Trusted for this workspace: {', '.join(names)}; starting them."
        )
        await _report(app, runtime, await runtime.start_mcp())

    async def answered(trusted: bool) -> None:
        if trusted:
            _in_worker(app, trust)

    return TrustQuestion(McpTrustScreen(untrusted), answered)


def _in_worker(app: CodeWhaleApp, work: Callable[[], Coroutine[None, None, None]]) -> Worker[None]:
    # A function rather than a coroutine: work a quitting app never starts leaves no
    # coroutine unawaited. A server's trouble is reported, never the app's end.
    return app.run_worker(work, group="mcp", exit_on_error=False)


async def _report(app: CodeWhaleApp, runtime: Runtime, problems: list[str]) -> None:
    if app.runtime is not runtime:  # the session was closed or replaced meanwhile
        return
    for problem in problems:
        await app.transcript.notice(problem, "warning")


async def show_servers(app: CodeWhaleApp, runtime: Runtime) -> None:
    await app.transcript.notice(format_statuses(runtime.mcp_statuses()))
