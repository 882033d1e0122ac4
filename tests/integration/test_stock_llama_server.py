"""The stock llama-cpp-python server (`python -m llama_cpp.server`), as users start it,
on the bundled model (issue 29): it sends no usage, so CodeWhale estimates the counts and
says they are estimates."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from codewhale.providers.client import ChatClient
from codewhale.providers.types import StreamFinished
from tests.support.local_model import local_settings, require_local_model
from tests.support.settings import TEST_KEY, app_environment

pytestmark = [pytest.mark.localmodel, pytest.mark.slow, pytest.mark.xdist_group("localmodel")]


@contextmanager
def stock_server(*options: str) -> Iterator[str]:
    """`python -m llama_cpp.server` on a free port with `options`; its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = str(require_local_model())
    command = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1"]
    process = subprocess.Popen(
        [*command, "--port", str(port), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, "the stock server exited"
            assert time.monotonic() < deadline, "the stock server never answered"
            time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_exec(base_url: str, tmp_path, *flags: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_API_KEY=TEST_KEY,
        CODEWHALE_PROVIDER="llamacpp",
        CODEWHALE_BASE_URL=base_url,
    )
    return subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), *flags, "say hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


async def test_it_sends_no_usage_and_the_counts_are_estimated(tmp_path):
    with stock_server("--n_ctx", "8192") as base_url:
        settings = local_settings(base_url, provider="llamacpp", offer_tools=False)
        async with ChatClient(settings) as client:
            finished = [
                event
                async for event in client.stream([{"role": "user", "content": "Hi."}], max_tokens=8)
                if isinstance(event, StreamFinished)
            ]
        result = run_exec(base_url, tmp_path, "--json")
    assert finished[0].completion.usage is None  # the server's own answer: no counts
    assert result.returncode == 0, result.stderr
    usage = [json.loads(line) for line in result.stdout.splitlines() if '"type": "usage"' in line]
    assert usage and all(event["estimated"] for event in usage)
    assert all(event["input"] > 1000 for event in usage)  # the system prompt and the tools
