"""How a request reaches the endpoint: httpcore's connection pool on asyncio's own streams.

With twenty children streaming at once, the client's CPU per step decides how
late the last child's next request goes out, so the HTTP path is kept short:
- No `httpx.AsyncClient`: an API client needs none of its per-request work
  (merging defaults, the cookie jar, redirect and auth flows, event hooks).
- No anyio: httpcore's default network backend wraps every read and write in an
  anyio cancel scope and a checkpoint; the backend here calls asyncio's streams
  directly, which halves the loop turns per request.
Requests and responses are still httpx's types, and errors httpx's exceptions.
What the AsyncClient would have read from the environment is read here: the proxy
variables and the CA bundle (which a plain-http endpoint never loads).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import select
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import httpcore
import httpx

from codewhale.providers.endpoint import is_loopback_host


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Loading the CA bundle costs ~20 ms; do it once per process, not once per client."""
    return httpx.create_ssl_context()


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY,
    minus NO_PROXY); never one for this machine's own servers."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host or is_loopback_host(host) or proxy_bypass(host):
        return None
    proxies = getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def _has_pending_input(sock: Any) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


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
            return _has_pending_input(self._writer.get_extra_info("socket"))
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


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """httpcore's errors as httpx's (same names), so callers catch one family."""
    try:
        yield
    except httpcore.TimeoutException as error:
        raise getattr(httpx, type(error).__name__, httpx.TimeoutException)(str(error)) from error
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError) as error:
        raise getattr(httpx, type(error).__name__, httpx.TransportError)(str(error)) from error
    except httpcore.UnsupportedProtocol as error:
        raise httpx.UnsupportedProtocol(str(error)) from error


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _as_httpx_errors():
            await self._stream.aclose()


class Transport:
    """Sends POSTs to one endpoint over a pool of kept-alive connections."""

    def __init__(
        self, url: str, *, connect_timeout: float, read_timeout: float, max_connections: int
    ) -> None:
        options: dict[str, Any] = {
            "ssl_context": _ssl_context() if url.startswith("https:") else None,
            "max_connections": max_connections,
            "max_keepalive_connections": max_connections // 2,
            "network_backend": _Backend(),
        }
        proxy = proxy_for(url)
        self._pool: httpcore.AsyncConnectionPool
        if proxy is None:
            self._pool = httpcore.AsyncConnectionPool(**options)
        elif proxy.startswith("socks"):
            self._pool = httpcore.AsyncSOCKSProxy(proxy_url=proxy, **options)
        else:
            self._pool = httpcore.AsyncHTTPProxy(proxy_url=proxy, **options)
        self._timeout = {
            "connect": connect_timeout,
            "read": read_timeout,
            "write": 30.0,
            "pool": None,
        }

    @contextlib.asynccontextmanager
    async def post(
        self, url: str, payload: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        """The response with its body unread; closed (its connection returned) on exit."""
        request = httpx.Request("POST", url, content=payload, headers=headers)
        with _as_httpx_errors():
            answer = await self._pool.handle_async_request(
                httpcore.Request(
                    "POST",
                    httpcore.URL(
                        scheme=request.url.raw_scheme,
                        host=request.url.raw_host,
                        port=request.url.port,
                        target=request.url.raw_path,
                    ),
                    headers=request.headers.raw,
                    content=payload,
                    extensions={"timeout": self._timeout},
                )
            )
        response = httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
            request=request,
        )
        try:
            yield response
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._pool.aclose()
