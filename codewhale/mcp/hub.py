"""A session's MCP servers: which there are, which may start, their tools and their states.

Built with the session (no server starts then: the session may open in a thread, before
the app's first frame is even drawn); `start` launches the trusted ones as background
tasks, `ready` waits for them (the first model request does), `close` stops them.
Listeners hear of every change, which is how the parent's tool list gains a server's
tools when it comes up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from codewhale.config_models import McpConfig
from codewhale.mcp.server import PENDING, McpServer, ServerState
from codewhale.mcp.specs import ServerSpec, load_specs
from codewhale.mcp.tool import McpTool, make_tool
from codewhale.mcp.trust import TrustStore
from codewhale.paths import UserDirs
from codewhale.private_files import private_dir

if TYPE_CHECKING:
    from mcp import types


@dataclass(frozen=True)
class ToolInfo:
    name: str  # as the model sees it: mcp__<server>__<tool>
    description: str


@dataclass(frozen=True)
class ServerStatus:
    """One server as `/mcp` and `codewhale mcp list` show it."""

    name: str
    source: str
    transport: str
    target: str
    read_only: bool
    state: ServerState
    error: str
    tools: tuple[ToolInfo, ...]
    skipped_tools: tuple[str, ...]
    log_file: Path

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "transport": self.transport,
            "target": self.target,
            "read_only": self.read_only,
            "state": self.state.value,
            "error": self.error or None,
            "tools": [{"name": t.name, "description": t.description} for t in self.tools],
            "skipped_tools": list(self.skipped_tools),
            "log": str(self.log_file),
        }


def log_dir(dirs: UserDirs) -> Path:
    return dirs.state_dir / "mcp"


def trust_file(dirs: UserDirs) -> Path:
    return dirs.state_dir / "mcp-trust.json"


class McpHub:
    def __init__(
        self,
        specs: list[ServerSpec],
        *,
        workspace: Path,
        dirs: UserDirs,
        startup_timeout: float,
        warnings: Iterable[str] = (),
    ) -> None:
        self.workspace = workspace
        self.trust_store = TrustStore(trust_file(dirs))
        self.log_dir = log_dir(dirs)
        self.startup_timeout = startup_timeout
        self.warnings = list(warnings)
        self._listeners: list[Callable[[], None]] = []
        self._servers = {
            spec.name: McpServer(
                spec,
                workspace=workspace,
                log_file=self.log_dir / f"{spec.name}.log",
                startup_timeout=startup_timeout,
                trusted=self.trust_store.trusted(workspace, spec),
                on_change=self._changed,
            )
            for spec in specs
        }
        # Per server, its tools as the model sees them, rebuilt when it lists new ones.
        self._tools: dict[str, list[McpTool]] = {}
        self._skipped: dict[str, list[str]] = {}
        # The listing each server's tools were made from (a new one after a restart).
        self._listed: dict[str, list[types.Tool]] = {}
        self._started = False
        untrusted = [s.name for s in self._servers.values() if s.state is ServerState.UNTRUSTED]
        if untrusted:
            self.warnings.append(
                f"{workspace / '.mcp.json'} names MCP servers you have not trusted, so they do "
                f"not start: {', '.join(untrusted)}. Trust them with /mcp trust in the app or "
                "`codewhale mcp trust`."
            )

    @classmethod
    def from_config(cls, config: McpConfig, workspace: Path, dirs: UserDirs) -> McpHub:
        specs, warnings = load_specs(config, workspace)
        return cls(
            specs,
            workspace=workspace,
            dirs=dirs,
            startup_timeout=config.startup_timeout_secs,
            warnings=warnings,
        )

    # -- what the session and front ends read ----------------------------------------------------

    def server_names(self) -> frozenset[str]:
        """Every server a tool list may name (untrusted ones too: they may be trusted later)."""
        return frozenset(self._servers)

    def tools(self) -> list[McpTool]:
        """The tools of every server that has listed them, in config order."""
        return [tool for name in self._servers for tool in self._tools.get(name, ())]

    def tool(self, name: str) -> McpTool | None:
        return next((tool for tool in self.tools() if tool.name == name), None)

    def untrusted(self) -> list[ServerSpec]:
        return [s.spec for s in self._servers.values() if s.state is ServerState.UNTRUSTED]

    def statuses(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                name=server.name,
                source=server.spec.source,
                transport=server.spec.transport,
                target=server.spec.target(),
                read_only=server.spec.read_only,
                state=server.state,
                error=server.error,
                tools=tuple(
                    ToolInfo(
                        tool.name, tool.description.splitlines()[0] if tool.description else ""
                    )
                    for tool in self._tools.get(server.name, ())
                ),
                skipped_tools=tuple(self._skipped.get(server.name, ())),
                log_file=server.log_file,
            )
            for server in self._servers.values()
        ]

    def subscribe(self, listener: Callable[[], None]) -> None:
        """`listener` runs after every change of a server's state or tools."""
        self._listeners.append(listener)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every trusted server in the background; needs a running event loop."""
        if not self._started:
            from codewhale.mcp.connection import log_sdk_messages

            private_dir(self.log_dir)
            log_sdk_messages(self.log_dir / "client.log")
        self._started = True
        for server in self._servers.values():
            server.start()

    async def ready(self) -> list[str]:
        """Start what has not started, wait for it (at most the startup timeout), and say
        which servers are not usable, one line each."""
        if not self._servers:
            return []
        if not self._started:
            # The SDK (and anyio, pydantic models of the protocol) takes ~150 ms to import:
            # in a thread, so the event loop (the app's held input) does not wait on it.
            await asyncio.to_thread(import_module, "codewhale.mcp.connection")
        self.start()
        await asyncio.gather(
            *(s.settled(self.startup_timeout) for s in self._servers.values() if s.state in PENDING)
        )
        problems = []
        for server in self._servers.values():
            if server.state is ServerState.FAILED:
                why = server.error
            elif server.state in PENDING:
                why = f"is still {server.state.value} after {self.startup_timeout:g} s"
            else:
                continue
            problems.append(f"MCP server '{server.name}' {why} (log: {server.log_file})")
        return problems

    def trust(self, names: Iterable[str] | None = None) -> list[str]:
        """Remember the user's trust in these project servers (all untrusted ones when None)
        and start them if the session's servers have started; returns the names trusted."""
        wanted = set(names) if names is not None else None
        chosen = [
            server
            for server in self._servers.values()
            if server.state is ServerState.UNTRUSTED and (wanted is None or server.name in wanted)
        ]
        self.trust_store.trust(self.workspace, (server.spec for server in chosen))
        for server in chosen:
            server.trust()
            if self._started:
                server.start()
        return [server.name for server in chosen]

    async def close(self) -> None:
        await asyncio.gather(*(server.stop() for server in self._servers.values()))

    def _changed(self) -> None:
        for server in self._servers.values():
            if self._listed.get(server.name) is not server.tools:
                self._listed[server.name] = server.tools
                made = [(listed.name, make_tool(server, listed)) for listed in server.tools]
                self._tools[server.name] = [tool for _, tool in made if tool is not None]
                self._skipped[server.name] = [name for name, tool in made if tool is None]
        for listener in tuple(self._listeners):
            listener()
