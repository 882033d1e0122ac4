"""How a request reaches the endpoint: HTTP/1.1 on asyncio, pooled and kept alive.

With twenty children streaming at once, the client's CPU per step decides how
late the last child's next request goes out, so the HTTP path is kept short:
- No `httpx.AsyncClient`: an API client needs none of its per-request work
  (merging defaults, the cookie jar, redirect and auth flows, event hooks).
- Directly (the usual case), http1.py: a request head built once per endpoint, and
  the response parsed from the loop's own buffer (see there for what that saves).
- Through a proxy, proxied.py: httpcore's proxy pools (CONNECT tunnels, SOCKS), imported
  only then.
Responses are http_types.Response and errors http_types' exceptions on both paths; httpx
is not imported (it cost ~44 ms when a session opens).
What the AsyncClient would have read from the environment is read here: the proxy
variables and the CA bundle (which a plain-http endpoint never loads).
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit
from urllib.request import getproxies, proxy_bypass

import certifi

from codewhale.providers import http1
from codewhale.providers.endpoint import is_loopback_host
from codewhale.providers.http_types import Response

if TYPE_CHECKING:
    from codewhale.providers.proxied import ProxiedPool


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The CA bundle as httpx chose it: SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's.

    Loading it costs ~20 ms; done once per process, not once per client.
    """
    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY,
    minus NO_PROXY); never one for this machine's own servers."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host or is_loopback_host(host) or proxy_bypass(host):
        return None
    proxies = getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


_DEFAULT_PORTS = {"http": 80, "https": 443}
# What a URL's path and query may hold as they are; anything else is percent-encoded
# (as httpx did), an existing %XX escape kept.
_PATH_SAFE = "/%!$&'()*+,;=:@-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


class _Endpoint:
    """What every request to one URL with one set of headers shares, built once."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        parts = urlsplit(url)
        scheme = parts.scheme
        # Lower case, brackets of an IPv6 address removed, a non-ASCII name in IDNA.
        host = (parts.hostname or "").encode("idna").decode("ascii")
        port = parts.port or _DEFAULT_PORTS[scheme]
        self.origin = (scheme, host, port)
        # For a proxy: None is the scheme's own port, which an absolute URL leaves out.
        named_port = None if port == _DEFAULT_PORTS[scheme] else port
        self.proxy_origin = (scheme.encode(), host.encode(), named_port)
        netloc = f"[{host}]" if ":" in host else host
        if named_port is not None:
            netloc += f":{named_port}"
        target = quote(parts.path or "/", safe=_PATH_SAFE)
        if parts.query:
            target += "?" + quote(parts.query, safe=_QUERY_SAFE)
        self.target = target.encode("ascii")
        # What error messages name: the URL as sent.
        self.url = f"{scheme}://{netloc}{target}"
        # Host first unless the caller names one, then the caller's (ASCII, as HTTP/1.1
        # wants); only Content-Length differs between requests.
        fields = [
            (name.encode("ascii"), value.encode("ascii"))
            for name, value in headers.items()
            if name.lower() not in ("content-length", "transfer-encoding")
        ]
        if not any(name.lower() == "host" for name in headers):
            fields.insert(0, (b"Host", netloc.encode("ascii")))
        self.headers = fields
        lines = [b"POST " + self.target + b" HTTP/1.1"]
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
        self._response: Response | None = None

    async def __aenter__(self) -> Response:
        transport, url, body, headers, read_timeout = self._request
        self._response = await transport._send(url, body, headers, read_timeout)
        return self._response

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            await self._response.aclose()


# Distinct (URL, headers) pairs are a handful per client; a bound all the same.
_MAX_ENDPOINTS = 16


class Transport:
    """Sends POSTs to one endpoint over a pool of kept-alive connections.

    Directly, each origin gets its own http1.ConnectionPool; through a proxy (named by the
    environment for the configured URL), proxied.ProxiedPool carries every request.
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
        self._proxied: ProxiedPool | None = None
        if proxy is not None:
            from codewhale.providers.proxied import ProxiedPool  # httpcore: only for a proxy

            self._proxied = ProxiedPool(
                proxy,
                _ssl_context() if url.startswith("https:") else None,
                connect_timeout=connect_timeout,
                max_connections=max_connections,
            )

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
    ) -> Response:
        endpoint = self._endpoint(url, headers)
        read_timeout = self._read_timeout if read_timeout is None else read_timeout
        if self._proxied is None:
            return await self._post_direct(endpoint, body, read_timeout)
        return await self._proxied.post(
            endpoint.url,
            endpoint.proxy_origin,
            endpoint.target,
            endpoint.headers,
            body,
            read_timeout,
        )

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
    ) -> Response:
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
        return Response(answer.status, answer.reason, answer.headers, answer, endpoint.url)

    async def aclose(self) -> None:
        for pool in self._direct.values():
            pool.close()
        if self._proxied is not None:
            await self._proxied.aclose()
