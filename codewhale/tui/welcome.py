"""The start screen's body: where you are, which model answers, and what to fix first."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from codewhale.config import LoadedConfig
from codewhale.providers.presets import preset_for


def describe_setup(loaded: LoadedConfig) -> Text:
    """Plain facts about the effective setup, built as Text so no value is read as markup."""
    settings = loaded.provider_settings()
    text = Text()
    text.append("Workspace  ", style="bold")
    text.append(f"{loaded.workspace}\n")
    text.append("Provider   ", style="bold")
    text.append(f"{settings.label} · {settings.base_url}\n")
    text.append("Model      ", style="bold")
    text.append(f"{settings.model}\n")
    text.append("API key    ", style="bold")
    if settings.api_key:
        text.append(f"from {settings.api_key_source}\n", style="green")
    else:
        key_env = preset_for(settings.provider).key_env or "CODEWHALE_API_KEY"
        hint = f"set {key_env} or add api_key to {loaded.user_file}"
        text.append(f"not configured: {hint}\n", style="yellow")
    for warning in loaded.warnings:
        text.append(f"\n⚠ {warning}", style="yellow")
    text.append(
        "\n\nThe conversation view is not built yet: this release ships the config, "
        "the provider client and `codewhale config`. Press Ctrl+Q to quit.",
        style="dim",
    )
    return text


class Welcome(Static, can_focus=True):
    """Static summary of the session's setup."""

    def __init__(self, loaded: LoadedConfig) -> None:
        super().__init__(describe_setup(loaded), markup=False)
