"""One MCP server through a session: started in the background, restarted once if it
crashes, stopped with the session. Its state moves through ServerState; its stderr and
the reasons it stopped go to its log file, never to the screen.

A supervisor task owns the connection: the SDK's transports are anyio task groups, which
must be entered and left by one task. Tool calls from any task use its session.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codewhale.mcp.specs import Resolved, ServerSpec, SpecError
from codewhale.private_files import private_opener
from codewhale.tools.base import ToolError

if TYPE_CHECKING:
    from mcp import ClientSession, types

# How long closing waits for a server to exit before its task is cancelled (stdio
# servers get 2 s from the SDK after their stdin closes, then SIGTERM, then SIGKILL).
STOP_SECS = 6.0
# How long a call whose server died waits to learn whether it was restarted.
CRASH_NOTICE_SECS = 5.0
# A server that crashes this many times is not started again this session.
MAX_CRASHES = 2


class ServerState(StrEnum):
    DISABLED = "disabled"  # `enabled = false` in the config
    UNTRUSTED = "untrusted"  # a project server the user has not trusted: never started
    WAITING = "waiting"  # trusted, not started yet (servers start after the first frame)
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"  # crashed once, starting again
    FAILED = "failed"  # could not start, or crashed twice
    STOPPED = "stopped"  # closed with the session


# States in which the server may still come up: calls and the first request wait.
PENDING = frozenset({ServerState.WAITING, ServerState.STARTING, ServerState.RESTARTING})


class McpServer:
    def __init__(
        self,
        spec: ServerSpec,
        *,
        workspace: Path,
        log_file: Path,
        startup_timeout: float,
        trusted: bool,
        on_change: Callable[[], None],
    ) -> None:
        self.spec = spec
        self.workspace = workspace
        self.log_file = log_file
        self.startup_timeout = startup_timeout
        self._on_change = on_change
        self.state = (
            ServerState.DISABLED
            if not spec.enabled
            else ServerState.WAITING
            if trusted
            else ServerState.UNTRUSTED
        )
        self.error = ""
        self.crashes = 0
        # As the server listed them; kept after a crash, so its tools still answer (with
        # the reason) instead of vanishing from the model's list.
        self.tools: list[types.Tool] = []
        self._session: ClientSession | None = None
        self._resolved: Resolved | None = None
        # Bumped at every connection, so a failed call knows whether a restart followed it.
        self._generation = 0
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()

    @property
    def name(self) -> str:
        return self.spec.name

    # -- lifecycle -------------------------------------------------------------------------

    def trust(self) -> None:
        if self.state is ServerState.UNTRUSTED:
            self._set(ServerState.WAITING)

    def start(self) -> None:
        """Start in the background (within a running event loop); idempotent."""
        if self.state is ServerState.WAITING and self._task is None:
            self._set(ServerState.STARTING)
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def settled(self, timeout: float) -> None:
        """Wait until the server is up or has failed (at most `timeout` seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.state in PENDING and self._task is not None:
            if not await self._wait_change(deadline - loop.time()):
                return

    async def stop(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if self.state is not ServerState.READY:
                # Still starting: nothing to shut down gently, and waiting for it to
                # finish starting could take the whole startup timeout.
                task.cancel()
            # asyncio.wait, not wait_for: the task ending cancelled (as just asked) is no
            # error of the closer's, and a timeout must not cancel it before we choose to.
            done, _ = await asyncio.wait({task}, timeout=STOP_SECS)
            if not done:
                task.cancel()
                await asyncio.wait({task})
        if self.state not in (ServerState.DISABLED, ServerState.UNTRUSTED, ServerState.FAILED):
            self._set(ServerState.STOPPED)

    async def _supervise(self) -> None:
        from codewhale.mcp.connection import connect

        while not self._stop.is_set():
            up_before = self._generation
            reason = "the server exited" if self.spec.command else "the connection ended"
            try:
                self._resolved = self.spec.resolve(os.environ)
                with open(self.log_file, "a", encoding="utf-8", opener=private_opener) as errlog:
                    self._log(errlog, f"starting ({self.spec.transport} {self.spec.target()})")
                    async with connect(
                        self._resolved,
                        cwd=self.workspace,
                        errlog=errlog,
                        timeout=self.startup_timeout,
                        sse=self.spec.sse,
                    ) as connection:
                        self._generation += 1
                        # After a restart, `error` still says what happened before it.
                        self._session = connection.session
                        hidden = self.spec.disabled_tools
                        self.tools = [t for t in connection.tools if t.name not in hidden]
                        self._set(ServerState.READY)
                        await _first_of(connection.lost.wait, self._stop.wait)
                        self._session = None
                        if not self._stop.is_set():
                            self._log(errlog, reason)
            except SpecError as error:
                self._fail(f"cannot start: {error}")
                return
            except Exception as error:  # the SDK and its transports raise many kinds
                reason = self._describe(error)
            self._session = None
            if self._stop.is_set():
                return
            if self._generation == up_before:
                self._fail(f"could not start: {reason}")
                return
            self.crashes += 1
            if self.crashes >= MAX_CRASHES:
                self._fail(f"crashed {self.crashes} times ({reason}); not restarted")
                return
            self.error = f"crashed ({reason}); restarted"
            self._set(ServerState.RESTARTING)

    # -- calls -----------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call a tool; ToolError with a reason the model and user can act on otherwise."""
        import anyio
        from mcp.shared.exceptions import McpError
        from mcp.types import CONNECTION_CLOSED

        if self.state in PENDING:
            await self.settled(self.startup_timeout)
        session = self._session
        if session is None or self.state is not ServerState.READY:
            raise ToolError(self.unavailable())
        generation = self._generation
        try:
            return await session.call_tool(tool, arguments)
        except McpError as error:
            if error.error.code != CONNECTION_CLOSED:
                raise ToolError(self.scrub(f"{tool} failed: {error.error.message}")) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the connection closed under the call: the server is gone
        except RuntimeError as error:  # the SDK's check of structured content against its schema
            raise ToolError(self.scrub(str(error))) from None
        except OSError as error:
            raise ToolError(self.scrub(f"{tool} failed: {error}")) from None
        raise ToolError(await self._crashed_during(tool, generation))

    async def _crashed_during(self, tool: str, generation: int) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CRASH_NOTICE_SECS
        while self.state is ServerState.READY and self._generation == generation:
            if not await self._wait_change(deadline - loop.time()):
                break
        if self.state is ServerState.FAILED:
            return (
                f"MCP server '{self.name}' exited while running {tool}, for the second time "
                f"this session, so it is not restarted; its tools are unavailable. "
                f"Log: {self.log_file}"
            )
        return (
            f"MCP server '{self.name}' exited while running {tool}; it has been restarted "
            f"(once per session). Call the tool again only if repeating it is safe. "
            f"Log: {self.log_file}"
        )

    def unavailable(self) -> str:
        """Why the server's tools cannot be called now."""
        why = {
            ServerState.DISABLED: "it is disabled in the config",
            ServerState.UNTRUSTED: "this project's .mcp.json servers are not trusted yet "
            "(/mcp trust, or `codewhale mcp trust`)",
            ServerState.STOPPED: "the session is closing",
        }.get(self.state, self.error or f"it is {self.state.value}")
        return f"MCP server '{self.name}' is not running: {why}. Log: {self.log_file}"

    # -- internals -------------------------------------------------------------------------

    def _set(self, state: ServerState) -> None:
        self.state = state
        # Wake everyone waiting on a change, then arm a fresh event for the next one.
        self._changed.set()
        self._changed = asyncio.Event()
        self._on_change()

    def _fail(self, error: str) -> None:
        self.error = error
        self._set(ServerState.FAILED)
        try:
            with open(self.log_file, "a", encoding="utf-8", opener=private_opener) as log:
                self._log(log, error)
        except OSError:
            pass

    async def _wait_change(self, timeout: float) -> bool:
        """Wait for the next state change; False when `timeout` passed first."""
        if timeout <= 0:
            return False
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _describe(self, error: BaseException) -> str:
        """The innermost cause, in a line (task groups wrap errors in groups)."""
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        if isinstance(error, FileNotFoundError) and self.spec.command is not None:
            return f"command not found: {self.spec.command}"
        if isinstance(error, TimeoutError):
            return f"no answer within {self.startup_timeout:g} s"
        text = str(error) or type(error).__name__
        return self.scrub(text.splitlines()[0])

    def scrub(self, text: str) -> str:
        """`text` without the secret values of this server's env, headers and URL."""
        return self._resolved.scrub(text) if self._resolved is not None else text

    def _log(self, log: Any, line: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"--- {stamp} codewhale: {self.name}: {self.scrub(line)}\n")
        log.flush()


async def _first_of(*waits: Callable[[], Any]) -> None:
    """Return when the first of these waits returns; the others are cancelled."""
    import anyio

    async with anyio.create_task_group() as group:

        async def run(wait: Callable[[], Any]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(run, wait)
