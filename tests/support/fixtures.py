"""Pytest fixtures for the loopback LLM, and a bare TCP server on the host's loopback."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support.llm_server import LoopbackLLM


@pytest.fixture
def llm():
    """A started loopback server, stopped when the test ends."""
    with LoopbackLLM() as server:
        yield server


@pytest.fixture
def loopback_port() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1 that accepts and closes connections; its port.

    The sandbox tests try to reach it: a sandbox without network has its own loopback.
    """
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                server.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()
