"""One live connection to one MCP server through the official SDK: transport, session, tools.

Imported only when a server starts (the SDK is a few hundred milliseconds of imports),
never on the app's first-frame path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio
import httpx
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from codewhale import __version__
from codewhale.mcp.specs import Resolved
from codewhale.private_files import private_dir, private_opener

CLIENT_INFO = types.Implementation(name="codewhale", version=__version__)
# The SDK's defaults for streamable HTTP: a response may stream for minutes.
HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)
# Pages of tools/list followed; a server paging forever is not followed forever.
MAX_TOOL_PAGES = 50


@dataclass
class Connection:
    session: ClientSession
    tools: list[types.Tool]
    # Set when the transport ends: the server exited, or the link to it broke.
    lost: anyio.Event


@asynccontextmanager
async def connect(
    resolved: Resolved, *, cwd: Path, errlog: TextIO, timeout: float, sse: bool = False
) -> AsyncIterator[Connection]:
    """Start or reach the server, initialize and list its tools within `timeout` seconds;
    a url server over streamable HTTP, or over the older HTTP+SSE transport (`sse`)."""
    async with AsyncExitStack() as stack:
        if resolved.command is not None:
            params = StdioServerParameters(
                command=resolved.command, args=resolved.args, env=resolved.env, cwd=cwd
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        elif sse:
            assert resolved.url is not None
            read, write = await stack.enter_async_context(
                sse_client(
                    resolved.url,
                    headers=resolved.headers,
                    timeout=HTTP_TIMEOUT.connect or 30.0,
                    sse_read_timeout=HTTP_TIMEOUT.read or 300.0,
                )
            )
        else:
            assert resolved.url is not None
            client = await stack.enter_async_context(
                httpx.AsyncClient(headers=resolved.headers, timeout=HTTP_TIMEOUT)
            )
            read, write, _ = await stack.enter_async_context(
                streamable_http_client(resolved.url, http_client=client)
            )
        # The SDK's session does not say when its transport ends, so its messages pass
        # through a relay that does.
        lost = anyio.Event()
        relay_send, relay_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        relays = await stack.enter_async_context(anyio.create_task_group())
        relays.start_soon(_relay, read, relay_send, lost)
        # Unwound before the relay's group exits, which would otherwise wait for it.
        stack.callback(relays.cancel_scope.cancel)

        async def server_log(params: types.LoggingMessageNotificationParams) -> None:
            errlog.write(f"[{params.level}] {resolved.scrub(str(params.data))}\n")
            errlog.flush()

        session = await stack.enter_async_context(
            ClientSession(relay_read, write, logging_callback=server_log, client_info=CLIENT_INFO)
        )
        with anyio.fail_after(timeout):
            await session.initialize()
            tools = await _list_tools(session)
        yield Connection(session, tools, lost)


async def _relay(
    source: ObjectReceiveStream[SessionMessage | Exception],
    sink: ObjectSendStream[SessionMessage | Exception],
    lost: anyio.Event,
) -> None:
    try:
        async with sink:
            async for item in source:
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        lost.set()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


def log_sdk_messages(path: Path) -> None:
    """The SDK's own log lines go to `path`: on stderr they would land on the TUI's screen."""
    logger = logging.getLogger("mcp")
    if any(getattr(handler, "codewhale", False) for handler in logger.handlers):
        return
    private_dir(path.parent)
    # Made 0600 now: the handler opens it later, in append mode, which keeps the mode.
    os.close(private_opener(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.codewhale = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
