"""fetch_url connects to the address it checked (issue 29): the name is resolved once,
so an answer that changes between the check and the connection (DNS rebinding) cannot
send the request to a private address."""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest

from codewhale.tools.web import fetch, pinned


class _EchoHost(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"host={self.headers['Host']}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoHost)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


async def test_the_request_goes_to_the_checked_address_never_to_a_new_lookup(port):
    # `rebind.invalid` resolves nowhere (RFC 6761): the page can only come from the
    # address handed over, and the server still sees the name the URL gave.
    url = f"http://rebind.invalid:{port}/page"
    async with httpx.AsyncClient(trust_env=False) as client:
        body, response = await fetch(client, url, "127.0.0.1")
        assert response.status_code == 200
        assert body == f"host=rebind.invalid:{port}".encode()
        with pytest.raises(httpx.ConnectError):  # a lookup of the name would fail
            await fetch(client, url, None)


def test_pinning_keeps_the_name_for_host_and_tls():
    target, headers, extensions = pinned("https://example.org/a?b=1", "93.184.215.14")
    assert target == "https://93.184.215.14/a?b=1"
    assert headers["Host"] == "example.org" and extensions == {"sni_hostname": "example.org"}
    target, headers, _ = pinned(
        "http://example.org:8080/", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"
    )
    assert target == "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8080/"
    assert headers["Host"] == "example.org:8080"
    assert pinned("http://example.org/", None) == (
        "http://example.org/",
        {"User-Agent": "codewhale"},
        {},
    )
