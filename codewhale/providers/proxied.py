"""POSTs through a proxy (HTTP CONNECT or SOCKS), on httpcore's proxy pools.

Imported only when the environment names a proxy for the endpoint, so httpcore is not
loaded otherwise. Its network backend here calls asyncio's streams directly: httpcore's
default one wraps every read and write in an anyio cancel scope and a checkpoint.
httpcore's errors become http_types' (same names), so the client catches one family
whichever path a request took.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any

import httpcore

from codewhale.providers import http1, http_types
from codewhale.providers.http_types import Response, TransportError

_OUR_ERRORS: dict[type[Exception], type[TransportError]] = {
    httpcore.ConnectTimeout: http_types.ConnectTimeout,
    httpcore.PoolTimeout: http_types.PoolTimeout,
    httpcore.ReadTimeout: http_types.ReadTimeout,
    httpcore.WriteTimeout: http_types.WriteTimeout,
    httpcore.TimeoutException: http_types.TransportTimeout,
    httpcore.ConnectError: http_types.ConnectError,
    httpcore.ReadError: http_types.ReadError,
    httpcore.WriteError: http_types.WriteError,
    httpcore.RemoteProtocolError: http_types.RemoteProtocolError,
    httpcore.ProxyError: http_types.ProxyError,
    httpcore.UnsupportedProtocol: http_types.UnsupportedProtocol,
}
_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


@contextlib.contextmanager
def _as_our_errors() -> Iterator[None]:
    """httpcore's errors as http_types' of the same name (else the family's base)."""
    try:
        yield
    except _HTTPCORE_ERRORS as error:
        kind = next(
            (_OUR_ERRORS[cls] for cls in type(error).__mro__ if cls in _OUR_ERRORS),
            TransportError,
        )
        raise kind(str(error)) from error


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout(f"no data for {timeout:g} s") from None
        except OSError as error:
            raise httpcore.ReadError(str(error) or type(error).__name__) from error

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError:
            raise httpcore.WriteTimeout(f"could not send for {timeout:g} s") from None
        except OSError as error:
            raise httpcore.WriteError(str(error) or type(error).__name__) from error

    async def aclose(self) -> None:
        # Not waiting for the peer: a dead endpoint must not hold up closing a session.
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"TLS handshake took over {timeout:g} s") from None
        except (OSError, ssl.SSLError) as error:
            raise httpcore.ConnectError(str(error) or type(error).__name__) from error
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # Asked of an idle pooled connection: input there means the server closed it.
            # The end may be in the reader already or still in the socket (the loop has
            # not run since it arrived).
            if self._reader.at_eof() or self._writer.is_closing():
                return True
            return http1.has_pending_input(self._writer.get_extra_info("socket"))
        names = {
            "ssl_object": "ssl_object",
            "client_addr": "sockname",
            "server_addr": "peername",
            "socket": "socket",
        }
        return self._writer.get_extra_info(names[info]) if info in names else None


class _Backend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection within {timeout:g} s") from None
        except OSError as error:
            raise httpcore.ConnectError(str(error) or type(error).__name__) from error
        sock: socket.socket = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return _Stream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Body:
    """httpcore's response stream as an http_types.Body, raising our errors."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_our_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _as_our_errors():
            await self._stream.aclose()


class ProxiedPool:
    """Kept-alive connections through the proxy `proxy_url` (http://, socks5:// or socks5h://)."""

    def __init__(
        self,
        proxy_url: str,
        ssl_context: ssl.SSLContext | None,
        *,
        connect_timeout: float,
        max_connections: int,
    ) -> None:
        options: dict[str, Any] = {
            "ssl_context": ssl_context,
            "max_connections": max_connections,
            "max_keepalive_connections": max_connections // 2,
            "network_backend": _Backend(),
        }
        self._pool: httpcore.AsyncConnectionPool
        if proxy_url.startswith("socks"):
            self._pool = httpcore.AsyncSOCKSProxy(proxy_url=proxy_url, **options)
        else:
            self._pool = httpcore.AsyncHTTPProxy(proxy_url=proxy_url, **options)
        self._timeout = {
            "connect": connect_timeout,
            "write": http1.WRITE_TIMEOUT_SECS,
            "pool": None,
        }

    async def post(
        self,
        url: str,
        origin: tuple[bytes, bytes, int | None],
        target: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: Sequence[bytes],
        read_timeout: float,
    ) -> Response:
        """`body` sent to `origin` (scheme, host, port: None for the scheme's own) and
        `target`; the response with its body unread."""
        scheme, host, port = origin
        payload = b"".join(body)
        with _as_our_errors():
            answer = await self._pool.handle_async_request(
                httpcore.Request(
                    "POST",
                    httpcore.URL(scheme=scheme, host=host, port=port, target=target),
                    headers=[*headers, (b"Content-Length", str(len(payload)).encode())],
                    content=payload,
                    extensions={"timeout": {**self._timeout, "read": read_timeout}},
                )
            )
        reason = answer.extensions.get("reason_phrase", b"")
        return Response(answer.status, reason, answer.headers, _Body(answer.stream), url)

    async def aclose(self) -> None:
        await self._pool.aclose()
