"""Pytest fixtures for the loopback LLM."""

from __future__ import annotations

import pytest

from tests.support.llm_server import LoopbackLLM


@pytest.fixture
def llm():
    """A started loopback server, stopped when the test ends."""
    with LoopbackLLM() as server:
        yield server
