"""How a request reaches the endpoint: HTTP/1.1 on asyncio, pooled and kept alive.

With twenty children streaming at once, the client's CPU per step decides how
late the last child's next request goes out, so the HTTP path is kept short:
- No `httpx.AsyncClient`: an API client needs none of its per-request work
  (merging defaults, the cookie jar, redirect and auth flows, event hooks).
- Directly (the usual case), http1.py: a request head built once per endpoint, and
  the response parsed from the loop's own buffer (see there for what that saves).
- Through a proxy, httpcore's proxy pools (CONNECT tunnels, SOCKS), on a network
  backend that calls asyncio's streams directly: httpcore's default one wraps every
  read and write in an anyio cancel scope and a checkpoint.
Requests and responses are still httpx's types, and errors httpx's exceptions.
What the AsyncClient would have read from the environment is read here: the proxy
variables and the CA bundle (which a plain-http endpoint never loads).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import httpcore
import httpx

from codewhale.providers import http1
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


def body_parts(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The response body's bytes as they arrive, to be read once and closed.

    A body nothing has coded (no Content-Encoding: what a chat API sends unasked) comes
    straight from the connection; httpx's iterators, with their decoders and chunkers,
    cost two more generators for every piece, the body's end included.
    """
    stream = response.stream
    if isinstance(stream, http1.Response) and "content-encoding" not in response.headers:
        parts = aiter(stream)
    else:
        parts = response.aiter_bytes()
    # Async generators both, which the reader closes; typed as mere iterators.
    return cast(AsyncGenerator[bytes, None], parts)


class _Endpoint:
    """What every request to one URL with one set of headers shares, built once."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        # Parsed and normalised by httpx as before (Host added); the response refers to it
        # for its URL. Only Content-Length differs between requests.
        self.request = httpx.Request("POST", url, headers=headers)
        parsed = self.request.url
        self.origin = (parsed.scheme, parsed.host, parsed.port or _DEFAULT_PORTS[parsed.scheme])
        self.headers = [
            (name, value)
            for name, value in self.request.headers.raw
            if name.lower() not in (b"content-length", b"transfer-encoding")
        ]
        lines = [b"POST " + parsed.raw_path + b" HTTP/1.1"]
        lines += [name + b": " + value for name, value in self.headers]
        self._head = b"\r\n".join(lines) + b"\r\nContent-Length: "

    def head_for(self, length: int) -> bytes:
        return self._head + str(length).encode() + b"\r\n\r\n"


class _Posted:
    """Transport.post's context: the request sent on entry, its response closed on exit.

    A class rather than an asynccontextmanager, which costs an async generator (and the
    event loop's hooks for one) on every request.
    """

    def __init__(
        self,
        transport: Transport,
        url: str,
        body: Sequence[bytes],
        headers: Mapping[str, str],
        read_timeout: float | None,
    ) -> None:
        self._request = (transport, url, body, headers, read_timeout)
        self._response: httpx.Response | None = None

    async def __aenter__(self) -> httpx.Response:
        transport, url, body, headers, read_timeout = self._request
        self._response = await transport._send(url, body, headers, read_timeout)
        return self._response

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            await self._response.aclose()


_DEFAULT_PORTS = {"http": 80, "https": 443}
# Distinct (URL, headers) pairs are a handful per client; a bound all the same.
_MAX_ENDPOINTS = 16


class Transport:
    """Sends POSTs to one endpoint over a pool of kept-alive connections.

    Directly, each origin gets its own http1.ConnectionPool; through a proxy (named by the
    environment for the configured URL), httpcore's proxy pool carries every request.
    """

    def __init__(
        self, url: str, *, connect_timeout: float, read_timeout: float, max_connections: int
    ) -> None:
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_connections = max_connections
        self._direct: dict[tuple[str, str, int], http1.ConnectionPool] = {}
        self._endpoints: dict[tuple[str, tuple[tuple[str, str], ...]], _Endpoint] = {}
        proxy = proxy_for(url)
        self._proxied: httpcore.AsyncConnectionPool | None = None
        if proxy is not None:
            options: dict[str, Any] = {
                "ssl_context": _ssl_context() if url.startswith("https:") else None,
                "max_connections": max_connections,
                "max_keepalive_connections": max_connections // 2,
                "network_backend": _Backend(),
            }
            if proxy.startswith("socks"):
                self._proxied = httpcore.AsyncSOCKSProxy(proxy_url=proxy, **options)
            else:
                self._proxied = httpcore.AsyncHTTPProxy(proxy_url=proxy, **options)
        self._timeout = {
            "connect": connect_timeout,
            "read": read_timeout,
            "write": http1.WRITE_TIMEOUT_SECS,
            "pool": None,
        }

    def post(
        self,
        url: str,
        body: Sequence[bytes],
        headers: Mapping[str, str],
        *,
        read_timeout: float | None = None,
    ) -> _Posted:
        """`body` (its parts, in order) sent; the response with its body unread, closed (its
        connection returned) on exit.

        `read_timeout` (default: the transport's) bounds each wait for bytes, the response
        head's included: an idle limit, never one on the response as a whole.
        """
        return _Posted(self, url, body, headers, read_timeout)

    async def _send(
        self,
        url: str,
        body: Sequence[bytes],
        headers: Mapping[str, str],
        read_timeout: float | None,
    ) -> httpx.Response:
        endpoint = self._endpoint(url, headers)
        read_timeout = self._read_timeout if read_timeout is None else read_timeout
        if self._proxied is None:
            return await self._post_direct(endpoint, body, read_timeout)
        return await self._post_proxied(self._proxied, endpoint, body, read_timeout)

    def _endpoint(self, url: str, headers: Mapping[str, str]) -> _Endpoint:
        key = (url, tuple(headers.items()))
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            if len(self._endpoints) >= _MAX_ENDPOINTS:
                self._endpoints.clear()
            endpoint = self._endpoints[key] = _Endpoint(url, headers)
        return endpoint

    async def _post_direct(
        self, endpoint: _Endpoint, body: Sequence[bytes], read_timeout: float
    ) -> httpx.Response:
        pool = self._direct.get(endpoint.origin)
        if pool is None:
            scheme, host, port = endpoint.origin
            pool = self._direct[endpoint.origin] = http1.ConnectionPool(
                host,
                port,
                _ssl_context() if scheme == "https" else None,
                connect_timeout=self._connect_timeout,
                read_timeout=self._read_timeout,
                max_connections=self._max_connections,
            )
        answer = await pool.request(endpoint.head_for(sum(map(len, body))), body, read_timeout)
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=answer,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason},
            request=endpoint.request,
        )

    async def _post_proxied(
        self,
        pool: httpcore.AsyncConnectionPool,
        endpoint: _Endpoint,
        body: Sequence[bytes],
        read_timeout: float,
    ) -> httpx.Response:
        url = endpoint.request.url
        payload = b"".join(body)
        with _as_httpx_errors():
            answer = await pool.handle_async_request(
                httpcore.Request(
                    "POST",
                    httpcore.URL(
                        scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
                    ),
                    headers=[*endpoint.headers, (b"Content-Length", str(len(payload)).encode())],
                    content=payload,
                    extensions={"timeout": {**self._timeout, "read": read_timeout}},
                )
            )
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
            request=endpoint.request,
        )

    async def aclose(self) -> None:
        for pool in self._direct.values():
            pool.close()
        if self._proxied is not None:
            await self._proxied.aclose()
