"""Shared fixtures: every test runs with its own user dirs and no provider env vars."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.support.fixtures", "tests.support.subagents"]

_PROVIDER_ENV_SUFFIXES = ("_API_KEY", "_BASE_URL", "_MODEL", "_PROVIDER", "_MEMORY")

# Property tests check what holds, not how fast: on a busy machine one example can take
# far longer than hypothesis's 200 ms default deadline, which would fail a sound test.
settings.register_profile(
    "loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("loaded-machine")

# Code a test module runs as it is collected (sandbox_status(), which remembers a working
# bwrap in the state dir) comes before any fixture: it gets a throwaway home too, never
# the developer's own.
os.environ["CODEWHALE_HOME"] = _collection_home = tempfile.mkdtemp(prefix="codewhale-tests-")
atexit.register(shutil.rmtree, _collection_home, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Point CODEWHALE_HOME at a fresh dir and drop env vars that would change config."""
    home = tmp_path_factory.mktemp("codewhale-home")
    for name in list(os.environ):
        if name.startswith(("CODEWHALE_", "DEEPSEEK_")) or name.endswith(_PROVIDER_ENV_SUFFIXES):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CODEWHALE_HOME", str(home))
    # The developer's own Claude Code agents and CLAUDE.md stay out of every test.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    return home
