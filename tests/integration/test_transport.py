"""The HTTP path under the client: TLS, proxies and pooled connections, for real."""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl

import pytest
import trustme

from codewhale.providers import errors, http_types, transport
from codewhale.providers.client import ChatClient, encode_body
from tests.support.llm_server import LoopbackLLM, Reply
from tests.support.settings import loopback_settings
from tests.support.socks import socks5_proxy

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def https_llm(tmp_path, monkeypatch):
    """An https:// loopback endpoint whose certificate a throwaway CA signed."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server_context)
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    transport._ssl_context.cache_clear()
    with LoopbackLLM(tls=server_context) as llm:
        yield llm, str(bundle)
    transport._ssl_context.cache_clear()


async def test_streams_over_tls_from_an_endpoint_the_ca_bundle_trusts(https_llm, monkeypatch):
    llm, bundle = https_llm
    monkeypatch.setenv("SSL_CERT_FILE", bundle)
    llm.enqueue(Reply(text=["secure ", "hello"]), Reply(text="again"))
    async with ChatClient(loopback_settings(llm.base_url)) as client:
        assert (await client.complete(HELLO)).content == "secure hello"
        assert (await client.complete(HELLO)).content == "again"
    assert llm.base_url.startswith("https://")
    assert len(llm.requests) == 2


async def test_an_untrusted_certificate_is_a_clear_connection_error(https_llm):
    llm, _ = https_llm
    llm.enqueue(Reply(text="never read"))
    settings = loopback_settings(llm.base_url, max_retries=0)
    async with ChatClient(settings) as client:
        with pytest.raises(errors.ProviderConnectionError) as caught:
            await client.complete(HELLO)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert llm.requests == []


async def test_a_pooled_connection_the_server_closed_is_replaced_not_failed(llm):
    llm.enqueue(Reply(text="first"), Reply(text="second"))
    async with ChatClient(loopback_settings(llm.base_url, max_retries=0)) as client:
        assert (await client.complete(HELLO)).content == "first"
        llm._server.close_open_connections()  # the idle keep-alive connection ends
        assert (await client.complete(HELLO)).content == "second"


async def test_an_http_proxy_from_the_environment_carries_the_request(llm, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{llm._server.server_address[1]}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    llm.enqueue(Reply(text="via proxy"))
    settings = loopback_settings("http://api.example.test/v1", allow_insecure_http=True)
    async with ChatClient(settings) as client:
        assert (await client.complete(HELLO)).content == "via proxy"
    # A proxy is sent the absolute URL of the real endpoint.
    assert llm.requests[0].path == "http://api.example.test/v1/chat/completions"


def test_proxies_skip_loopback_and_no_proxy_hosts(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "api.example.test")
    assert transport.proxy_for("https://api.deepseek.com/v1") == "http://proxy.internal:3128"
    assert transport.proxy_for("https://api.example.test/v1") is None
    assert transport.proxy_for("http://127.0.0.1:8080/v1") is None
    assert transport.proxy_for("http://localhost:8080/v1") is None


# -- the direct HTTP/1.1 path, against a server that answers with scripted bytes ------------


class RawServer:
    """A TCP server on 127.0.0.1 that reads each request and answers with scripted bytes.

    `answers` (each a list of byte strings, or that and `close`) are sent in order, one per
    request; `requests` holds every request's head lines and body, `connections` counts the
    connections accepted. An answer may end the connection (`close=True`); otherwise the
    server keeps it open, answered or not, until the client closes it.
    """

    def __init__(self, *answers, gap: float = 0.001):
        self.answers = list(answers)
        self.gap = gap  # between an answer's parts
        self.requests: list[tuple[list[bytes], bytes]] = []
        self.connections = 0

    async def __aenter__(self):
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.url = self.base_url + "/chat/completions"
        return self

    async def __aexit__(self, *exc_info):
        self._server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head[:-4].split(b"\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in lines
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                self.requests.append((lines, body))
                answer = self.answers.pop(0)
                parts, close = answer if isinstance(answer, tuple) else (answer, False)
                for part in parts:
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(self.gap)  # arrives in pieces, as from a network
                if close:
                    return
            await reader.read()  # answered all: hold the connection until the client ends it
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def sse(*chunks: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)


def chunked(*pieces: bytes, extension: bytes = b"", trailers: bytes = b"") -> bytes:
    framed = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces)
    return framed + b"0\r\n" + trailers + b"\r\n"


def head(status: str = "200 OK", **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def make_transport(url: str, read_timeout: float = 5.0) -> transport.Transport:
    return transport.Transport(url, connect_timeout=2, read_timeout=read_timeout, max_connections=4)


async def post(sender: transport.Transport, url: str, *parts: bytes) -> tuple[int, bytes]:
    async with sender.post(url, list(parts), {"Content-Type": "application/json"}) as response:
        return response.status_code, await response.aread()


BODY = b'{"id":"x","choices":[]}'

FRAMINGS = {
    "content-length": head(Content_Length=str(len(BODY))) + BODY,
    "chunked, with extensions and trailers": head(Transfer_Encoding="chunked")
    + chunked(BODY[:5], BODY[5:], extension=b";name=value", trailers=b"X-Trailer: 1\r\n"),
    "an interim 100 Continue first": b"HTTP/1.1 100 Continue\r\n\r\n"
    + head(Content_Length=str(len(BODY)))
    + BODY,
}


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_response_framed_any_way_is_read_whole_and_its_connection_kept(framing):
    answer = FRAMINGS[framing]
    # Split at every awkward place: inside the head, a size line, a chunk, its CRLF.
    pieces = [answer[i : i + 7] for i in range(0, len(answer), 7)]
    async with RawServer(pieces, pieces) as server:
        sender = make_transport(server.url)
        assert await post(sender, server.url, b"{}") == (200, BODY)
        assert await post(sender, server.url, b"{}") == (200, BODY)
        await sender.aclose()
    assert server.connections == 1


async def test_a_body_delimited_by_the_end_of_the_connection_is_read_to_it_and_not_reused():
    until_close = ([head(), BODY[:9], BODY[9:]], True)
    async with RawServer(until_close, until_close) as server:
        sender = make_transport(server.url)
        assert await post(sender, server.url, b"{}") == (200, BODY)
        assert await post(sender, server.url, b"{}") == (200, BODY)
        await sender.aclose()
    assert server.connections == 2


async def test_connection_close_from_the_server_opens_a_new_connection_next_time():
    closing = [head(Content_Length=str(len(BODY)), Connection="close") + BODY]
    async with RawServer((closing, True), closing) as server:
        sender = make_transport(server.url)
        for _ in range(2):
            assert await post(sender, server.url, b"{}") == (200, BODY)
        await sender.aclose()
    assert server.connections == 2


async def test_the_request_head_names_the_endpoint_and_the_body_arrives_whole_from_its_parts():
    parts = [b'{"a":"' + b"x" * 40_000, b"y" * 70_000, b'"}']
    async with RawServer([head(Content_Length="0")]) as server:
        sender = make_transport(server.url + "?beta=1")
        async with sender.post(server.url + "?beta=1", parts, {"X-Custom": "1"}) as response:
            await response.aread()
        await sender.aclose()
    lines, body = server.requests[0]
    assert body == b"".join(parts)
    assert lines[0] == b"POST /v1/chat/completions?beta=1 HTTP/1.1"
    fields = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(b":") for line in lines[1:])
    }
    assert fields[b"host"] == server.url.split("/")[2].encode()
    assert fields[b"content-length"] == str(len(body)).encode()
    assert fields[b"x-custom"] == b"1"


async def test_a_request_whose_first_part_is_long_arrives_whole_too():
    """A short first part goes out with the head; a long one is written after it."""
    parts = [b'{"a":"' + b"x" * 100_000, b'"}']
    async with RawServer([head(Content_Length="0")]) as server:
        sender = make_transport(server.url)
        async with sender.post(server.url, parts, {}) as response:
            await response.aread()
        await sender.aclose()
    assert server.requests[0][1] == b"".join(parts)


async def test_the_body_decodes_a_content_coded_body_and_passes_an_uncoded_one_through():
    """Read straight from the connection, an uncoded stream is the same bytes, and the
    connection is kept; a gzip-coded one is decoded."""
    plain = sse({"a": 1}, {"b": 2})
    coded = head(Transfer_Encoding="chunked", Content_Encoding="gzip")
    answers = (
        [head(Transfer_Encoding="chunked") + chunked(plain[:10], plain[10:])],
        [coded + chunked(gzip.compress(plain))],
    )
    async with RawServer(*answers) as server:
        sender = make_transport(server.url)
        for _ in answers:
            async with sender.post(server.url, [b"{}"], {}) as response:
                received = b"".join([part async for part in response.iter_bytes()])
            assert received == plain
        await sender.aclose()
    assert server.connections == 1


BROKEN = {
    "cut inside a Content-Length body": ([head(Content_Length="100") + BODY], True),
    "cut before the last chunk": ([head(Transfer_Encoding="chunked") + b"5\r\nhello\r\n"], True),
    "a chunk without its CRLF": (
        [head(Transfer_Encoding="chunked") + b"5\r\nhelloXX0\r\n\r\n"],
        False,
    ),
    "a chunk size that is not hex": (
        [head(Transfer_Encoding="chunked") + b"zz\r\nhello\r\n"],
        False,
    ),
    "no response at all": ([], True),
    "not HTTP": ([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"], False),
}


@pytest.mark.parametrize("broken", BROKEN)
async def test_a_broken_response_is_a_transport_error(broken):
    async with RawServer(BROKEN[broken]) as server:
        sender = make_transport(server.url)
        with pytest.raises(http_types.TransportError):
            await post(sender, server.url, b"{}")
        await sender.aclose()


async def test_a_server_that_stops_sending_is_a_read_timeout():
    async with RawServer([head(Content_Length="10") + b"abc"]) as server:
        sender = make_transport(server.url, read_timeout=0.2)
        with pytest.raises(http_types.ReadTimeout):
            await post(sender, server.url, b"{}")
        await sender.aclose()


async def test_the_read_timeout_is_per_wait_not_per_body_and_holds_on_a_reused_connection():
    # Each part comes 0.05 s after the last: every wait a twentieth of the timeout (a busy
    # machine's late wake-ups stay inside it), the body twice as long. The next answer on
    # the same connection never comes: without the timeout it would wait for good, so
    # the ceiling is for that hang.
    slow = [head(Content_Length="40"), *[b"x"] * 40]
    async with RawServer(slow, [head(Content_Length="6") + b"ab"], gap=0.05) as server:
        sender = make_transport(server.url, read_timeout=1.0)
        assert await post(sender, server.url, b"{}") == (200, b"x" * 40)
        async with asyncio.timeout(60):
            with pytest.raises(http_types.ReadTimeout):
                await post(sender, server.url, b"{}")
        await sender.aclose()
    assert server.connections == 1


# -- what the client sends and reads through it ----------------------------------------------


async def test_every_request_body_is_the_fresh_json_encoding_of_its_request(llm):
    """Steps of a long conversation (its encoded prefix sent as a part of its own) arrive
    as exactly the bytes a plain json.dumps of the whole request gives."""
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    messages = [{"role": "system", "content": "You are CodeWhale. " * 3_000}]
    sent = []
    async with ChatClient(loopback_settings(llm.base_url)) as client:
        for step in range(4):
            messages.append({"role": "user", "content": f"step {step} ✅ " + "z" * 20_000})
            llm.enqueue(Reply(text=f"answer {step}"))
            answer = await client.complete(messages, tools=tools)
            sent.append(client.build_body(messages, tools=tools))
            messages.append({"role": "assistant", "content": answer.content})
    assert len(sent[-1]["messages"]) == 8
    assert len(client.encode_request_parts(messages, tools=tools)) > 1  # sent in parts
    for request, body in zip(llm.requests, sent, strict=True):
        assert request.raw_body == encode_body(body)


SPLIT_STREAM = (
    "\ufeff: keep-alive\r\n\r\n".encode()
    + b"event: message\r\n"
    + sse({"choices": [{"index": 0, "delta": {"content": "caf\u00e9 "}}]}).replace(b"\n", b"\r\n")
    + b'data: {"choices": [{"index": 0,\ndata: "delta": {"content": "\xf0\x9f\x90\xb3"}}]}\n\n'
    + b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\r\r'
    + b"data: [DONE]\n\n"
)


async def test_an_event_stream_split_anywhere_reads_as_the_same_answer():
    """CRLF, LF and CR line ends, a BOM, comments, multi-line data and UTF-8 split
    between reads."""
    stream = head(Content_Type="text/event-stream", Transfer_Encoding="chunked")
    pieces = [SPLIT_STREAM[i : i + 3] for i in range(0, len(SPLIT_STREAM), 3)]
    async with RawServer([stream, chunked(*pieces)]) as server:
        settings = loopback_settings(server.base_url, max_retries=0)
        async with ChatClient(settings) as client:
            completion = await client.complete(HELLO)
    assert completion.content == "café 🐳"
    assert completion.finish_reason == "stop"


async def test_one_long_event_that_keeps_arriving_is_not_idle():
    """The idle limit is on bytes, not whole events: one delta's line (a long tool
    argument, a whole answer) may take longer than the limit to arrive."""
    text = "long " * 400
    event = sse({"choices": [{"index": 0, "delta": {"content": text}}]})
    done = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    pieces = [event[i : i + 100] for i in range(0, len(event), 100)] + [done, b"data: [DONE]\n\n"]
    stream = head(Content_Type="text/event-stream", Transfer_Encoding="chunked")
    # 22 pieces 0.1 s apart: 2 s for the one event, four times the limit.
    framed = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces] + [b"0\r\n\r\n"]
    async with RawServer([stream, *framed], gap=0.1) as server:
        settings = loopback_settings(server.base_url, stream_idle_timeout_secs=0.5, max_retries=0)
        async with ChatClient(settings) as client:
            completion = await client.complete(HELLO)
    assert completion.content == text


async def test_a_200_that_is_not_an_event_stream_is_a_protocol_error():
    page = b"<html>captive portal</html>"
    answer = head(Content_Type="text/html", Content_Length=str(len(page))) + page
    async with RawServer([answer]) as server:
        client = ChatClient(loopback_settings(server.base_url, max_retries=0))
        with pytest.raises(errors.ProtocolError, match="text/html"):
            await client.complete(HELLO)
        await client.aclose()


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
async def test_a_socks_proxy_from_the_environment_carries_the_request(llm, monkeypatch, scheme):
    with socks5_proxy() as proxy:
        monkeypatch.setenv("ALL_PROXY", f"{scheme}://127.0.0.1:{proxy.server_address[1]}")
        for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        llm.enqueue(Reply(text="via socks"))
        port = llm._server.server_address[1]
        # A name only the proxy resolves: reaching the server proves the proxy carried it.
        settings = loopback_settings(f"http://llm.socks.test:{port}/v1", allow_insecure_http=True)
        async with ChatClient(settings) as client:
            assert (await client.complete(HELLO)).content == "via socks"
    assert proxy.connections == [f"CONNECT {port}"]
    assert llm.requests[0].path == "/v1/chat/completions"


async def test_a_folded_response_header_is_read_as_one_line_not_retried(llm):
    llm.enqueue(Reply(text="folded", headers={"X-Folded": "first part\r\n\tsecond part"}))
    async with ChatClient(loopback_settings(llm.base_url, max_retries=3)) as client:
        assert (await client.complete(HELLO)).content == "folded"
    assert len(llm.requests) == 1


async def test_an_error_status_names_the_url_and_reads_the_body_in_its_charset():
    """A 404's message names the URL asked and the server's text, decoded by the charset
    its Content-Type names."""
    page = "café introuvable".encode("latin-1")
    answer = head(
        "404 Not Found",
        Content_Type="text/plain; charset=ISO-8859-1",
        Content_Length=str(len(page)),
    )
    async with RawServer([answer + page]) as server:
        client = ChatClient(loopback_settings(server.base_url, max_retries=0))
        with pytest.raises(errors.NotFoundError) as caught:
            await client.complete(HELLO)
        await client.aclose()
    assert f"answered 404 Not Found for {server.url}: café introuvable." in str(caught.value)


async def test_a_retry_after_header_is_read_whatever_the_case_of_its_name():
    answer = b"HTTP/1.1 429 Too Many Requests\r\nRETRY-AFTER: 7\r\nContent-Length: 0\r\n\r\n"
    async with RawServer([answer]) as server:
        client = ChatClient(loopback_settings(server.base_url, max_retries=0))
        with pytest.raises(errors.RateLimitError) as caught:
            await client.complete(HELLO)
        await client.aclose()
    assert caught.value.retry_after == 7


async def test_a_proxy_that_refuses_the_tunnel_is_a_clear_connection_error(llm, monkeypatch):
    """httpcore's ProxyError (the loopback server answers CONNECT with 501) reaches the
    user as a connection error naming the endpoint, not a traceback."""
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{llm._server.server_address[1]}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    settings = loopback_settings("https://api.example.test/v1", max_retries=0)
    async with ChatClient(settings) as client:
        with pytest.raises(errors.ProviderConnectionError) as caught:
            await client.complete(HELLO)
    assert str(caught.value).startswith("Could not reach DeepSeek at https://api.example.test/v1")
    assert "501" in str(caught.value)
