"""First run without a key: explain the choices and save a key to the user config."""

from __future__ import annotations

import tomllib

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from codewhale.atomic import atomic_write_text
from codewhale.config import LoadedConfig
from codewhale.providers.presets import preset_for


def save_api_key(loaded: LoadedConfig, key: str) -> None:
    """Add `api_key` to the user config (created if missing), file mode 0600."""
    import tomli_w

    path = loaded.user_file
    data = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data["api_key"] = key
    atomic_write_text(path, tomli_w.dumps(data), mode=0o600)


class OnboardingScreen(ModalScreen[bool]):
    def __init__(self, loaded: LoadedConfig) -> None:
        super().__init__()
        self.loaded = loaded

    def compose(self) -> ComposeResult:
        settings = self.loaded.provider_settings()
        key_env = preset_for(settings.provider).key_env or "CODEWHALE_API_KEY"
        with Vertical(id="onboarding"):
            yield Static(f"{settings.label} needs an API key", classes="title", markup=False)
            yield Static(
                f"Paste a key below to save it in {self.loaded.user_file} (readable only by "
                f"you), or quit and export {key_env}. To use another endpoint, set provider "
                "and base_url in that file (local servers such as ollama or llamacpp need no "
                "key) — see config.example.toml.",
                markup=False,
            )
            yield Input(placeholder="sk-…", password=True, id="key")
            yield Button("Save key", id="save", variant="primary")
            yield Button("Continue without a key", id="skip")

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            await self._save(self.query_one("#key", Input).value)
        else:
            self.dismiss(False)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        await self._save(event.value)

    async def _save(self, key: str) -> None:
        key = key.strip()
        if not key:
            self.notify("Paste a key first", severity="warning")
            return
        save_api_key(self.loaded, key)
        self.notify(f"Saved to {self.loaded.user_file}.")
        self.dismiss(True)
