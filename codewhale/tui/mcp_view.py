"""MCP servers in the app: started once a session has opened, a project's `.mcp.json` asked
about once, and `/mcp` to see them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from codewhale.mcp.disclosure import trust_details
from codewhale.mcp.listing import format_statuses
from codewhale.tui.armed import ArmedKeys

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from textual.worker import Worker

    from codewhale.mcp.specs import ServerSpec
    from codewhale.runtime import Runtime
    from codewhale.tui.app import CodeWhaleApp


class McpTrustScreen(ArmedKeys, ModalScreen[bool]):
    """Dismissed with True to trust (and start) the project's servers, False to leave them."""

    DEFAULT_CSS = """
    McpTrustScreen { align: center middle; }
    McpTrustScreen #mcp-trust {
        width: 100;
        max-width: 95%;
        height: auto;
        max-height: 90%;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    McpTrustScreen #mcp-trust .title { text-style: bold; margin-bottom: 1; }
    McpTrustScreen #mcp-trust .servers { height: auto; max-height: 20; margin-top: 1; }
    McpTrustScreen #mcp-trust .server { margin-bottom: 1; }
    McpTrustScreen #mcp-trust .buttons { height: auto; margin-top: 1; }
    """
    # Not starting programs is the safe answer, so it is the one under Enter.
    AUTO_FOCUS = "#mcp-later"
    BINDINGS = [  # noqa: RUF012 - Textual's convention
        Binding("t", "answer(True)", "Trust"),
        Binding("n,escape", "answer(False)", "Not now"),
    ]

    def __init__(self, specs: list[ServerSpec]) -> None:
        super().__init__()
        self.specs = specs
        # It opens as the session does, often while you are typing: a "t" is not a yes.
        self.arm()

    def compose(self) -> ComposeResult:
        with Vertical(id="mcp-trust"):
            yield Static(
                "This project's .mcp.json wants to start MCP servers", classes="title", markup=False
            )
            yield Static(
                "They run as programs on your machine (or are reached over HTTP) with your "
                "user's rights, and their tools are offered to the model; each call still "
                "asks for approval in Agent mode. Trusting is remembered for this workspace "
                "until the file changes them.",
                markup=False,
            )
            yield Static(
                "A project's server is never given your API key or a secret-looking "
                "variable; other ${VAR}s only if your user config lists them in "
                "[mcp] project_env.",
                markup=False,
            )
            with VerticalScroll(classes="servers"):
                for spec in self.specs:
                    # Text from a cloned repository: trust_details makes it safe to print.
                    yield Static("\n".join(trust_details(spec)), classes="server", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(escape("Trust and start [t]"), id="mcp-trust-yes", variant="warning")
                yield Button(escape("Not now [n]"), id="mcp-later", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "mcp-trust-yes")

    def action_answer(self, trusted: bool) -> None:
        if self.armed():
            self.dismiss(trusted)


def start_servers(app: CodeWhaleApp, runtime: Runtime) -> Worker[None]:
    """A session has opened: start its servers in a worker, ask about untrusted project
    ones, and say which servers did not come up."""

    async def start() -> None:
        ask_trust(app, runtime)
        await _report(app, runtime, await runtime.start_mcp())

    return _in_worker(app, start)


def ask_trust(app: CodeWhaleApp, runtime: Runtime) -> bool:
    """Ask about the project's untrusted servers; False when there are none."""
    untrusted = runtime.mcp_untrusted()
    if not untrusted:
        return False

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

    def answered(trusted: bool | None) -> None:
        if trusted:
            _in_worker(app, trust)

    app.push_screen(McpTrustScreen(untrusted), answered)
    return True


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
