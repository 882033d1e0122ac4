"""The read timer of http1's connections, on a real event loop and real sockets.

One timer per connection serves every wait for bytes: these tests pin down that it
bounds each wait (the response head's included), never a whole body, and that a
shorter limit on a reused connection holds. The server below paces its own bytes.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest

from codewhale.providers import http1
from codewhale.providers.http_types import ReadError, ReadTimeout

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
# A bound on each test, far above any limit used, so a broken timer fails instead of hanging.
BOUND_SECS = 60


class Server:
    """A TCP server on 127.0.0.1 that runs `handler` for each request on a connection."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await self.handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def pool_for(server: Server) -> http1.ConnectionPool:
    return http1.ConnectionPool(
        "127.0.0.1", server.port, None, connect_timeout=5, read_timeout=60, max_connections=2
    )


async def post(pool: http1.ConnectionPool, read_timeout: float) -> bytes:
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
    response = await pool.request(head, [b"{}"], read_timeout)
    return b"".join([part async for part in response])


async def test_a_body_paced_under_the_limit_is_read_whole_however_long_it_takes():
    async def paced(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n")
        # 2 s in all, twice the limit; each wait a twentieth of it, so that a busy
        # machine's late wake-ups stay well inside it.
        for _ in range(40):
            await asyncio.sleep(0.05)
            writer.write(b"x")

    async with Server(paced) as server, asyncio.timeout(BOUND_SECS):
        pool = pool_for(server)
        assert await post(pool, read_timeout=1.0) == b"x" * 40
        pool.close()


async def test_silence_before_the_response_head_fails_the_head_wait():
    async def silent(reader, writer):
        await reader.read()  # never answers

    async with Server(silent) as server, asyncio.timeout(BOUND_SECS):
        pool = pool_for(server)
        with pytest.raises(ReadTimeout, match=r"no data for 0\.2 s"):
            await post(pool, read_timeout=0.2)
        pool.close()


async def test_silence_in_the_middle_of_a_body_fails_that_wait():
    async def stops(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await reader.read()

    async with Server(stops) as server, asyncio.timeout(BOUND_SECS):
        pool = pool_for(server)
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
        response = await pool.request(head, [b"{}"], 0.2)
        parts = []
        with pytest.raises(ReadTimeout):
            async for part in response:
                parts.append(part)
        assert parts == [b"abc"]
        pool.close()


async def test_a_shorter_limit_on_a_reused_connection_holds():
    """The timer armed for the first request's 60 s must not outlive its limit: the
    second request on the same connection waits 0.2 s, not 60."""
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]

    async def once(reader, writer):
        if answers:
            writer.write(answers.pop())

    async with Server(once) as server, asyncio.timeout(BOUND_SECS):
        pool = pool_for(server)
        assert await post(pool, read_timeout=60) == b"ok"
        with pytest.raises(ReadTimeout, match=r"no data for 0\.2 s"):
            await post(pool, read_timeout=0.2)
        pool.close()
    assert server.connections == 1


async def test_a_reset_cuts_a_body_read_to_the_end_of_the_connection_short():
    """Such a body ends when the server closes the connection; a reset is no such end."""

    async def resets(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x")
        await writer.drain()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async with Server(resets) as server, asyncio.timeout(BOUND_SECS):
        pool = pool_for(server)
        with pytest.raises(ReadError, match="cut short"):
            await post(pool, read_timeout=5)
        pool.close()
