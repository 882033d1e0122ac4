"""fetch_url: one web page as text, with caps on size, time and redirects.

Addresses on this machine or a private network are refused (unless
`[network] allow_private = true`), so a prompt-injected page cannot make the
agent probe the user's LAN or cloud metadata endpoints. The request then goes to the
address that was checked, not to a second lookup of the name: a DNS answer that
changes between the two (rebinding) cannot turn an allowed host into a private one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

from codewhale.permissions import ApprovalClass
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

MAX_BYTES = 2 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT_SECS = 30.0
MAX_TEXT_CHARS = 40_000
_BLOCK_TAGS = frozenset(
    [
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "tr",
        "table",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "blockquote",
        "section",
        "article",
        "header",
        "footer",
        "nav",
        "hr",
    ]
)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._skipping += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._skipping = max(self._skipping - 1, 0)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    extractor = _TextExtractor()
    extractor.feed(html)
    lines = (" ".join(line.split()) for line in "".join(extractor.parts).splitlines())
    text, blank = [], False
    for line in lines:
        if line or not blank:
            text.append(line)
        blank = not line
    return "\n".join(text).strip()


async def check_address(url: str, allow_private: bool) -> str | None:
    """Refuse non-http(s) URLs and hosts that resolve to non-public addresses; the
    address checked, to connect to (None: private addresses allowed, none pinned)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"only http:// and https:// URLs can be fetched, not {url!r}")
    if allow_private:
        return None
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname,
            parts.port or (443 if parts.scheme == "https" else 80),
            type=socket.SOCK_STREAM,
        )
    except OSError as error:
        raise ToolError(f"cannot resolve {parts.hostname}: {error}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global or address.is_multicast:
            raise ToolError(
                f"refusing to fetch {url}: {parts.hostname} resolves to {address}, which is "
                "a private, loopback or link-local address. Set [network] allow_private = true "
                "in the user config to allow it."
            )
    return str(infos[0][4][0])


def pinned(url: str, address: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(URL, headers, request extensions) that reach `url`'s server at `address`: the
    name stays in the Host header and in TLS (SNI and the certificate check)."""
    headers = {"User-Agent": "codewhale"}
    if address is None:
        return url, headers, {}
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    port = f":{parts.port}" if parts.port else ""
    headers["Host"] = f"{parts.hostname}{port}"
    target = parts._replace(netloc=f"{host}{port}").geturl()
    return target, headers, {"sni_hostname": parts.hostname}


async def fetch(client: Any, url: str, address: str | None) -> tuple[bytes, Any]:
    """GET `url` from `address` (see `pinned`): its body, at most MAX_BYTES, and response."""
    target, headers, extensions = pinned(url, address)
    async with client.stream("GET", target, headers=headers, extensions=extensions) as response:
        chunks, size = [], 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_BYTES:
                raise ToolError(f"{url} is larger than {MAX_BYTES} bytes; not fetched")
            chunks.append(chunk)
        return b"".join(chunks), response


class FetchUrl(Tool):
    name = "fetch_url"
    description = (
        "Fetch an http(s) URL and return its text (HTML converted to text, JSON pretty-"
        f"printed). At most {MAX_BYTES // 1024 // 1024} MB, {TIMEOUT_SECS:g}s, "
        f"{MAX_REDIRECTS} redirects."
    )
    parameters = {
        "type": "object",
        "properties": {"url": {"type": "string"}},
        "required": ["url"],
    }
    approval = ApprovalClass.REQUIRED

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        import httpx

        url = arguments["url"].strip()
        async with httpx.AsyncClient(timeout=TIMEOUT_SECS, follow_redirects=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                address = await check_address(url, context.allow_private_network)
                try:
                    body, response = await fetch(client, url, address)
                except httpx.HTTPError as error:
                    raise ToolError(
                        f"fetching {url} failed: {error or type(error).__name__}"
                    ) from None
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                break
            else:
                raise ToolError(f"more than {MAX_REDIRECTS} redirects; stopped at {url}")
        text = self._as_text(body, response.headers.get("content-type", ""))
        truncated = len(text) > MAX_TEXT_CHARS
        header = f"[{response.status_code} {url}]"
        if truncated:
            text = text[:MAX_TEXT_CHARS] + f"\n[… truncated at {MAX_TEXT_CHARS} characters]"
        return ToolResult(f"{header}\n{text}", ok=response.status_code < 400)

    def _as_text(self, body: bytes, content_type: str) -> str:
        text = body.decode("utf-8", errors="replace")
        if "json" in content_type:
            try:
                return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                return text
        if "html" in content_type or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
            return html_to_text(text)
        return text
