"""What the transport hands the client: a response, and the errors a request can end in.

Our own small types, not httpx's: the client needs a status, a few headers and the body,
and httpx cost ~44 ms to import when a session opens and an httpx.Response built for
every request cost microseconds on every step of every agent.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, Protocol, cast, overload

RawHeaders = Sequence[tuple[bytes, bytes]]


class TransportError(Exception):
    """The request did not complete: the connection, the server's bytes or a proxy failed."""


class TransportTimeout(TransportError):
    """A wait took longer than its limit."""


class ConnectTimeout(TransportTimeout):
    """No connection (TCP, TLS or a proxy's tunnel) within the connect timeout."""


class PoolTimeout(TransportTimeout):
    """No connection of the pool came free in time."""


class WriteTimeout(TransportTimeout):
    """The request could not be sent in time: the server stopped taking bytes."""


class ReadTimeout(TransportTimeout):
    """No bytes of the response arrived within the read timeout."""


class ConnectError(TransportError):
    """The connection (or its TLS handshake) failed."""


class ReadError(TransportError):
    """The connection failed while the response was being read."""


class WriteError(TransportError):
    """The connection failed while the request was being sent."""


class RemoteProtocolError(TransportError):
    """The server's bytes are not a valid HTTP/1.1 response."""


class ProxyError(TransportError):
    """The proxy refused to carry the request."""


class UnsupportedProtocol(TransportError):
    """A URL (the endpoint's or the proxy's) whose scheme cannot be spoken."""


class Body(Protocol):
    """A response body as it arrives from the connection: iterated once, then closed."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Headers:
    """A response's header fields: names ignore case, a repeated field's values join with ", "."""

    __slots__ = ("_index", "raw")

    def __init__(self, raw: RawHeaders) -> None:
        self.raw = raw
        # Built on the first lookup: a streamed answer is asked two or three names.
        self._index: dict[bytes, bytes] | None = None

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self._fields().get(name.lower().encode("latin-1"))
        return default if value is None else _header_text(value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower().encode("latin-1") in self._fields()

    def _fields(self) -> dict[bytes, bytes]:
        index = self._index
        if index is None:
            index = self._index = {}
            for name, value in self.raw:
                key = name.lower()
                index[key] = index[key] + b", " + value if key in index else value
        return index


class Response:
    """A response's status and headers, and its body: read once, whole or as it arrives."""

    __slots__ = ("_body", "_content", "_reason", "headers", "status_code", "url")

    def __init__(
        self, status_code: int, reason: bytes, headers: RawHeaders, body: Body, url: str
    ) -> None:
        self.status_code = status_code
        self._reason = reason
        self.headers = Headers(headers)
        self._body = body
        self.url = url
        self._content: bytes | None = None

    @property
    def reason_phrase(self) -> str:
        return self._reason.decode("ascii", "ignore")

    def iter_bytes(self) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they arrive, decoded as its Content-Encoding says.

        An uncoded body (what a chat API sends unasked) is the connection's own reader,
        with no generator around it: one layer less for every streamed part.
        """
        codings = self.headers.get("content-encoding")
        decoders = _decoders(codings) if codings is not None else []
        if not decoders:
            # An async generator the reader closes, typed as a mere iterator.
            return cast(AsyncGenerator[bytes, None], aiter(self._body))
        return _decoded(cast(AsyncGenerator[bytes, None], aiter(self._body)), decoders)

    async def aread(self) -> bytes:
        """The whole body (read on the first call)."""
        if self._content is None:
            parts = self.iter_bytes()
            try:
                self._content = b"".join([part async for part in parts])
            finally:
                await parts.aclose()
        return self._content

    @property
    def content(self) -> bytes:
        """The body that aread() read."""
        if self._content is None:
            raise RuntimeError("the response body was not read: await aread() first")
        return self._content

    @property
    def text(self) -> str:
        """The body read, decoded by the charset its Content-Type names (else UTF-8)."""
        return self.content.decode(_charset(self.headers.get("content-type", "")), "replace")

    async def aclose(self) -> None:
        """Stop reading: a body not read to its end closes its connection."""
        await self._body.aclose()


def _header_text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _charset(content_type: str) -> str:
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip("\"'")).name
            except LookupError:
                break
    return "utf-8"


def _decoders(codings: str) -> list[Any]:
    """Decompressors undoing `codings`, last applied first; an unknown coding (or
    identity) is passed through."""
    windows = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
    names = [coding.strip().lower() for coding in codings.split(",")]
    return [zlib.decompressobj(windows[name]) for name in reversed(names) if name in windows]


async def _decoded(
    parts: AsyncGenerator[bytes, None], decoders: list[Any]
) -> AsyncGenerator[bytes, None]:
    try:
        async for part in parts:
            for decoder in decoders:
                part = decoder.decompress(part)
            if part:
                yield part
        tail = b""
        for decoder in decoders:
            tail = decoder.decompress(tail) + decoder.flush()
        if tail:
            yield tail
    except zlib.error as error:
        raise RemoteProtocolError(
            f"the response body is not valid as its Content-Encoding says ({error})"
        ) from error
    finally:
        await parts.aclose()
