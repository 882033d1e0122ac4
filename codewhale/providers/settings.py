"""The resolved settings one provider client needs; built by the config loader."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProviderSettings:
    """Everything needed to talk to one OpenAI-compatible endpoint.

    `api_key` is excluded from repr so it cannot leak through logs or tracebacks.
    """

    provider: str
    label: str
    base_url: str
    model: str
    fast_model: str
    api_key: str | None = field(default=None, repr=False)
    api_key_source: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    allow_insecure_http: bool = False
    connect_timeout_secs: float = 10.0
    stream_idle_timeout_secs: float = 90.0
    max_retries: int = 4
    retry_deadline_secs: float = 120.0
    # False for endpoints whose model should see no tools (the offline 135M model).
    offer_tools: bool = True
    # Sent with every request as the preset's API takes it (see ProviderPreset.effort_field).
    reasoning_effort: str | None = None
    effort_field: str = "reasoning_effort"
