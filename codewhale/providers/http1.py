"""HTTP/1.1 POSTs straight on asyncio's transports, for endpoints reached without a proxy.

A request costs what the protocol needs: its head is built once per endpoint and set of
headers (only Content-Length changes), and the response is parsed from one buffer that
the event loop fills, waiting on the socket only when the buffer runs dry. Through
httpcore (kept in transport.py for proxies) the same request cost three times as much
CPU: a new httpx.Request, anyio locks and cancel scopes, h11 validating every header,
a coroutine per read.

Errors are http_types' exceptions, as on the proxied path: the client catches one family
whichever path a request took.
"""

from __future__ import annotations

import asyncio
import select
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any

from codewhale.providers.http_types import (
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    WriteTimeout,
)

# A response head longer than this is not from a chat API.
MAX_HEAD_BYTES = 64 * 1024
WRITE_TIMEOUT_SECS = 30.0
# A body part up to this long is copied behind the request head, to go out with it.
MAX_JOINED_BYTES = 64 * 1024
NO_BODY_STATUSES = frozenset({204, 304})

Headers = list[tuple[bytes, bytes]]


class _Connection(asyncio.Protocol):
    """One kept-alive connection: what arrived but is not yet parsed, and whether it ended."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._reason = ""
        # Ended by an error (a reset), not the server's orderly close: a body read to the
        # end of the connection is then cut short, not complete.
        self._failed = False
        self._writable: asyncio.Future[None] | None = None
        # The read timeout: a wait fails once its deadline passes. One timer serves every
        # wait; it is re-armed when it goes off before the deadline (a later wait moved
        # it) or would go off after it (a shorter timeout on a reused connection), since
        # a timer per wait (a streamed token each) cost more than the token's parsing.
        self._deadline = 0.0
        self._timeout = 0.0
        self._watchdog: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self._end("the server closed the connection")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self._end("the connection was closed")
        else:
            self._end(str(exc) or type(exc).__name__, failed=True)
        self._resume()

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._resume()

    def _end(self, reason: str, *, failed: bool = False) -> None:
        if not self._ended:
            self._ended, self._reason, self._failed = True, reason, failed
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _resume(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # -- used by the pool ----------------------------------------------------------

    def reusable(self) -> bool:
        """Idle and still open: nothing arrived since its last response (input on an idle
        connection means the server closed it; it may still be in the socket, unread)."""
        transport = self.transport
        if self._ended or self._buffer or transport is None or transport.is_closing():
            return False
        sock = transport.get_extra_info("socket")
        return sock is None or not has_pending_input(sock)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self._ended = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    async def send(self, head: bytes, body: Sequence[bytes]) -> None:
        """Head and body; the kernel takes what fits and the loop writes the rest."""
        assert self.transport is not None
        parts = iter(body)
        first = next(parts, b"")
        # A short first part goes out with the head: one packet, so the server is woken
        # once, with the whole request to read (woken by the head alone, it took the CPU
        # from this loop before the body was written). Longer parts are written as they
        # are, not copied into one joined body that may be megabytes long.
        if len(first) <= MAX_JOINED_BYTES:
            self.transport.write(head + first)
        else:
            self.transport.write(head)
            self.transport.write(first)
        for part in parts:
            self.transport.write(part)
        if self._writable is not None:
            try:
                async with asyncio.timeout(WRITE_TIMEOUT_SECS):
                    await self._writable
            except TimeoutError:
                raise WriteTimeout(f"could not send for {WRITE_TIMEOUT_SECS:g} s") from None

    async def _more(self, timeout: float | None) -> None:
        """Wait until more bytes arrive (or the connection ends), at most `timeout` s."""
        if self._ended:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        if timeout is not None:
            self._timeout = timeout
            self._deadline = loop.time() + timeout
            watchdog = self._watchdog
            if watchdog is None or watchdog.when() > self._deadline:
                if watchdog is not None:
                    watchdog.cancel()
                self._watchdog = loop.call_at(self._deadline, self._check_deadline)
        try:
            await waiter
        finally:
            self._waiter = None

    def _check_deadline(self) -> None:
        self._watchdog = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # not waiting: the next wait arms it again
        loop = asyncio.get_running_loop()
        if loop.time() < self._deadline:
            self._watchdog = loop.call_at(self._deadline, self._check_deadline)
        else:
            waiter.set_exception(ReadTimeout(f"no data for {self._timeout:g} s"))

    async def read_head(self, timeout: float | None) -> tuple[bytes, int, bytes, Headers]:
        """The final response's version, status, reason and headers (1xx ones skipped)."""
        while True:
            head = _parse_head(await self._read_head_block(timeout))
            if head[1] >= 200:
                return head

    async def _read_head_block(self, timeout: float | None) -> bytes:
        buffer = self._buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise RemoteProtocolError("the response head is too long")
            if self._ended:
                raise RemoteProtocolError(
                    f"the server sent no response ({self._reason})"
                    if not buffer
                    else f"the response head was cut short ({self._reason})"
                )
            await self._more(timeout)
        block = bytes(buffer[:end])
        del buffer[: end + 4]
        return block

    def body(
        self, framing: int | None, chunked: bool, timeout: float | None
    ) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive: `framing` bytes, chunked, or (None) to the end."""
        # The reader itself, not a generator around it: one layer less for every part.
        return self._chunked(timeout) if chunked else self._framed(framing, timeout)

    async def _framed(self, framing: int | None, timeout: float | None) -> AsyncIterator[bytes]:
        """`framing` bytes, or (None) all the connection carries to its end."""
        buffer = self._buffer
        remaining = framing
        while remaining is None or remaining > 0:
            if not buffer:
                if self._ended:
                    if remaining is None and not self._failed:
                        return  # the server closed the connection: the body's end
                    if remaining is None:
                        raise ReadError(f"the response was cut short ({self._reason})")
                    raise RemoteProtocolError(
                        f"the response ended {remaining} bytes early ({self._reason})"
                    )
                await self._more(timeout)
                continue
            size = len(buffer) if remaining is None else min(len(buffer), remaining)
            part = bytes(buffer[:size])
            del buffer[:size]
            if remaining is not None:
                remaining -= size
            yield part

    async def _chunked(self, timeout: float | None) -> AsyncIterator[bytes]:
        """Chunked transfer coding: every whole chunk in the buffer, joined, per wait."""
        buffer = self._buffer
        while True:
            parts = []
            finished = False
            while True:
                line_end = buffer.find(b"\r\n")
                if line_end < 0:
                    break
                size = _chunk_size(buffer[:line_end])
                if size == 0:
                    # The last chunk, then trailers (ignored) up to an empty line.
                    if buffer.startswith(b"\r\n", line_end + 2):
                        del buffer[: line_end + 4]
                        finished = True
                    elif (trailers_end := buffer.find(b"\r\n\r\n", line_end)) >= 0:
                        del buffer[: trailers_end + 4]
                        finished = True
                    break
                start = line_end + 2
                if len(buffer) < start + size + 2:
                    break
                if buffer[start + size : start + size + 2] != b"\r\n":
                    raise RemoteProtocolError("a chunk of the response is malformed")
                parts.append(bytes(buffer[start : start + size]))
                del buffer[: start + size + 2]
            if parts:
                yield b"".join(parts)
            if finished:
                return
            if len(buffer) > MAX_HEAD_BYTES and buffer.find(b"\r\n") < 0:
                raise RemoteProtocolError("a chunk size line is too long")
            if self._ended:
                raise RemoteProtocolError(
                    f"the response ended before its last chunk ({self._reason})"
                )
            await self._more(timeout)


def has_pending_input(sock: Any) -> bool:
    """Bytes (or the end) wait in the socket, not yet read by the loop."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


def _chunk_size(line: bytes | bytearray) -> int:
    digits = line.split(b";", 1)[0].strip()
    try:
        size = int(digits, 16)
    except ValueError:
        size = -1
    if size < 0 or not digits:
        raise RemoteProtocolError(f"a chunk size line is malformed: {bytes(line[:40])!r}")
    return size


def _parse_head(block: bytes) -> tuple[bytes, int, bytes, Headers]:
    lines = block.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise RemoteProtocolError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
    headers: Headers = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and headers:
            # An obsolete folded line continues the header above (RFC 9112 5.2): read as
            # one space, as httpx does, rather than failing a reply every client accepts.
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip())
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise RemoteProtocolError(f"a response header is malformed: {line[:80]!r}")
        headers.append((name, value.strip()))
    reason = parts[2] if len(parts) > 2 else b""
    return parts[0], int(parts[1]), reason, headers


def _framing(version: bytes, status: int, headers: Headers) -> tuple[int | None, bool, bool]:
    """(Content-Length or None, chunked?, keep-alive?) of a response to a POST."""
    length: int | None = None
    chunked = False
    keep_alive = version == b"HTTP/1.1"  # HTTP/1.0's opt-in keep-alive is not worth it
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            codings = [coding.strip() for coding in value.lower().split(b",")]
            chunked = codings[-1] == b"chunked"
            keep_alive = keep_alive and chunked  # another coding: read to the end
        elif lowered == b"content-length":
            if not value.isdigit() or (length is not None and int(value) != length):
                raise RemoteProtocolError(f"a Content-Length is invalid: {value[:40]!r}")
            length = int(value)
        elif lowered == b"connection" and b"close" in value.lower():
            keep_alive = False
    if status in NO_BODY_STATUSES:
        return 0, False, keep_alive
    if chunked:
        return None, True, keep_alive
    if length is None:
        return None, False, False  # delimited by the end of the connection
    return length, False, keep_alive


class Response:
    """A response's head, and its body (an http_types.Body): read once, to the end or until
    closed."""

    def __init__(
        self,
        pool: ConnectionPool,
        connection: _Connection,
        head: tuple[bytes, int, bytes, Headers],
        read_timeout: float,
    ) -> None:
        version, self.status, self.reason, self.headers = head
        self._pool = pool
        self._read_timeout = read_timeout
        self._connection: _Connection | None = connection
        self._length, self._chunked, self._keep_alive = _framing(version, self.status, self.headers)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        try:
            async for part in connection.body(self._length, self._chunked, self._read_timeout):
                yield part
        except BaseException:
            self.close()
            raise
        # Read to the end: the connection serves the next request.
        self._connection = None
        self._pool.release(connection, reuse=self._keep_alive)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Before the end of the body, the connection cannot serve another request."""
        if self._connection is not None:
            self._pool.release(self._connection, reuse=False)
            self._connection = None


class ConnectionPool:
    """Kept-alive connections to one origin, at most `max_connections` in use at once."""

    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        *,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
    ) -> None:
        self.host, self.port = host, port
        self.read_timeout = read_timeout
        self._ssl = ssl_context
        self._connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._max_idle = max(1, max_connections // 2)
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False

    async def request(
        self, head: bytes, body: Sequence[bytes], read_timeout: float | None = None
    ) -> Response:
        """Send one request; the response with its body unread (close() it, or read it all).

        `read_timeout` (default: the pool's) bounds every wait for bytes: for the response
        head, then between the body's bytes; never the response as a whole.
        """
        if read_timeout is None:
            read_timeout = self.read_timeout
        await self._slots.acquire()
        try:
            connection = await self._connection()
        except BaseException:
            self._slots.release()
            raise
        try:
            await connection.send(head, body)
            answer = await connection.read_head(read_timeout)
        except BaseException:
            self.release(connection, reuse=False)
            raise
        return Response(self, connection, answer, read_timeout)

    def release(self, connection: _Connection, *, reuse: bool) -> None:
        """A response is done with `connection`: keep it for the next one, or close it."""
        self._slots.release()
        if reuse and not self._closed and len(self._idle) < self._max_idle:
            self._idle.append(connection)
        else:
            connection.close()

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable():
                return connection
            connection.close()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl is not None else None,
                )
        except TimeoutError:
            raise ConnectTimeout(f"no connection within {self._connect_timeout:g} s") from None
        except OSError as error:  # ssl.SSLError included
            raise ConnectError(str(error) or type(error).__name__) from error
        return connection

    def close(self) -> None:
        """Close the idle connections (those in use close when their response does)."""
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()
