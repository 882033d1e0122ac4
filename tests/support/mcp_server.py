"""A real MCP server, written with the SDK's server side, for tests and benchmarks.

    python -m tests.support.mcp_server stdio     # MCP over stdin/stdout
    python -m tests.support.mcp_server http      # streamable HTTP on 127.0.0.1; prints its URL

Its tools cover what the client must handle: text, structured content, an image, a tool
error, a write into the working directory, and a crash (the process exits mid-call).

With `--record FILE` it appends what it was given, one JSON line each: over stdio its
command line and whole environment as it starts, over HTTP each request's URL and headers.

With `--hang handshake` the stdio server never answers (it does not even read its
input, so the end of its input does not end it); with `--hang exit` it serves, then runs
on after its input has ended, ignoring SIGTERM: only SIGKILL ends it.

Other arguments are accepted and only recorded.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from mcp.server.fastmcp import FastMCP, Image
from pydantic import BaseModel

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
NOTES = "notes-from-mcp.txt"


class Sum(BaseModel):
    total: int
    terms: list[int]


def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def add(a: int, b: int) -> Sum:
    """Add two integers; the result is structured."""
    return Sum(total=a + b, terms=[a, b])


def picture() -> Image:
    """A tiny PNG image."""
    return Image(data=PIXEL, format="png")


def fail(reason: str) -> str:
    """Always fails, with `reason`."""
    raise ValueError(reason)


def write_note(text: str) -> str:
    """Append a line to notes-from-mcp.txt in the server's working directory."""
    with Path(NOTES).open("a", encoding="utf-8") as notes:
        notes.write(text + "\n")
    return f"noted in {Path(NOTES).resolve()}"


def whoami() -> str:
    """The DEMO_TOKEN this server was started with."""
    return f"token={os.environ.get('DEMO_TOKEN', '')}"


def crash() -> str:
    """Exit the server process at once, in the middle of the call."""
    sys.stderr.write("demo server: crashing on request\n")
    sys.stderr.flush()
    os._exit(3)


def build_server() -> FastMCP:
    # Warnings only: at INFO it logs every request to stderr (our log file) through Rich.
    server = FastMCP("demo", log_level="WARNING")
    for function in (echo, add, picture, fail, write_note, whoami, crash):
        server.tool()(function)
    return server


def record(path: Path | None, entry: dict) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")


def recording_requests(app, path: Path | None):
    """`app` (ASGI), recording each HTTP request's URL and headers first."""

    async def recorded(scope, receive, send):
        if scope["type"] == "http":
            query = scope["query_string"].decode()
            record(
                path,
                {
                    "url": scope["path"] + (f"?{query}" if query else ""),
                    "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
                },
            )
        await app(scope, receive, send)

    return recorded


def serve_http(server: FastMCP, record_to: Path | None, *, sse: bool = False) -> None:
    import anyio
    import uvicorn

    # Bound here, so the port is known before the server starts and no other can take it.
    listener = socket.create_server(("127.0.0.1", 0))
    path, app = ("/sse", server.sse_app()) if sse else ("/mcp", server.streamable_http_app())
    print(f"http://127.0.0.1:{listener.getsockname()[1]}{path}", flush=True)
    app = recording_requests(app, record_to)
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[listener]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "http", "sse"])
    parser.add_argument("--record", type=Path)
    parser.add_argument("--hang", choices=["handshake", "exit"])
    options, _ = parser.parse_known_args()
    # Goes to the client's log file, never to the user's screen.
    sys.stderr.write(f"demo server: starting over {options.transport} in {Path.cwd()}\n")
    sys.stderr.flush()
    server = build_server()
    if options.transport in ("http", "sse"):
        serve_http(server, options.record, sse=options.transport == "sse")
    else:
        record(options.record, {"argv": sys.argv, "env": dict(os.environ)})
        if options.hang != "handshake":
            server.run("stdio")
        if options.hang == "exit":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if options.hang is not None:
            threading.Event().wait()  # until killed


if __name__ == "__main__":
    main()
