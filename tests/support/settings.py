"""ProviderSettings pointed at a loopback server, with test-friendly timeouts."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from codewhale.providers.settings import ProviderSettings

TEST_KEY = "sk-loopback-test-0123456789abcdef"


def loopback_settings(base_url: str, **overrides: Any) -> ProviderSettings:
    """DeepSeek-flavoured settings aimed at `base_url`, fast to fail and to retry."""
    settings = ProviderSettings(
        provider="deepseek",
        label="DeepSeek",
        base_url=base_url,
        model="deepseek-v4-flash",
        fast_model="deepseek-v4-flash",
        api_key=TEST_KEY,
        api_key_source="env DEEPSEEK_API_KEY",
        connect_timeout_secs=2.0,
        stream_idle_timeout_secs=5.0,
        max_retries=4,
        retry_deadline_secs=10.0,
    )
    return replace(settings, **overrides)


def app_environment(**values: str) -> dict[str, str]:
    """This environment without any key or CodeWhale setting, plus `values`.

    For a real `codewhale` process: what it sees of the provider is only what a test
    sets, never the developer's own key or endpoint.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith(("CODEWHALE_", "DEEPSEEK_"))
    }
    env.update(values)
    return env
