"""The HTTP path under the client: TLS, proxies and pooled connections, for real."""

from __future__ import annotations

import ssl

import pytest
import trustme

from codewhale.providers import errors, transport
from codewhale.providers.client import ChatClient
from tests.support.llm_server import LoopbackLLM, Reply
from tests.support.settings import loopback_settings

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
