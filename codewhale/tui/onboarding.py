"""Starting without a key: explain the choices, save a key to the user config, and
remember (per machine) that the offline model's dialog was shown."""

from __future__ import annotations

import contextlib
import json
import shutil

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from codewhale.atomic import atomic_write_text
from codewhale.config import LoadedConfig
from codewhale.config_write import update_config_file
from codewhale.paths import user_dirs
from codewhale.providers.local_model import missing_local_runtime
from codewhale.providers.presets import DEFAULT_PROVIDER, preset_for

# Local servers we can point at without a key, and the program that reveals each one.
LOCAL_SERVERS = {"ollama": "ollama", "llamacpp": "llama-server", "vllm": "vllm"}
# Per machine, not per workspace: the offline-model dialog is shown on the first launch only.
STATE_FILE = "onboarding.json"
OFFLINE_NOTICE = "offline_notice_shown"


def first_offline_launch() -> bool:
    """True the first time the offline model is used on this machine, remembering it.

    An unreadable state file counts as not seen (the dialog shows once more); a
    failed write is ignored, so a read-only state dir never blocks the app.
    """
    path = user_dirs().state_dir / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    if not isinstance(state, dict):
        state = {}
    if state.get(OFFLINE_NOTICE):
        return False
    with contextlib.suppress(OSError):
        atomic_write_text(path, json.dumps({**state, OFFLINE_NOTICE: True}) + "\n")
    return True


def key_problem(key: str) -> str | None:
    """Why `key` cannot be an API key, or None. Catches text meant for the composer (a
    slash command, a sentence) typed into the dialog's masked field, not every bad key."""
    if len(key) < 8:
        return "is too short"
    if any(char.isspace() for char in key):
        return "has spaces in it"
    if key.startswith("/"):
        return "starts with '/', like a command"
    if not key.isascii() or not key.isprintable():
        return "has characters an API key does not have"
    return None


def installed_local_providers() -> list[str]:
    return [name for name, program in LOCAL_SERVERS.items() if shutil.which(program)]


def save_user_settings(loaded: LoadedConfig, **values: str) -> None:
    """Set `values` in the user config (created if missing), keeping its comments."""
    update_config_file(loaded.user_file, values)


class OnboardingScreen(ModalScreen[bool]):
    # The app's AUTO_FOCUS names the composer, which this screen does not have.
    AUTO_FOCUS = "#key"
    BINDINGS = [Binding("escape", "skip", "Continue")]  # noqa: RUF012 - Textual's convention

    def __init__(self, loaded: LoadedConfig) -> None:
        super().__init__()
        self.loaded = loaded

    def compose(self) -> ComposeResult:
        offline = self.loaded.offline_fallback
        settings = self.loaded.provider_settings()
        hosted = preset_for(DEFAULT_PROVIDER if offline else settings.provider)
        key_env = hosted.key_env or "CODEWHALE_API_KEY"
        with Vertical(id="onboarding"):
            if offline:
                yield Static("No API key: using the offline model", classes="title", markup=False)
                yield Static(
                    "SmolLM2-135M runs on this machine with no network and no key. It can "
                    "chat, but it cannot read, edit or run anything and is no help with real "
                    "code. For real work, add a provider:",
                    markup=False,
                )
            else:
                yield Static(f"{hosted.label} needs an API key", classes="title", markup=False)
            yield Static(
                f"Paste a {hosted.label} key below to save it in {self.loaded.user_file} "
                f"(readable only by you), or quit and export {key_env}. To use another "
                "endpoint, set provider and base_url in that file (local servers such as "
                "ollama or llamacpp need no key): `codewhale config example` lists every key.",
                markup=False,
            )
            if not offline and (missing := missing_local_runtime()):
                yield Static(f"No key at all? {missing}", markup=False)
            yield Input(placeholder="sk-…", password=True, id="key")
            yield Button("Save key", id="save", variant="primary")
            for name in installed_local_providers():
                yield Button(
                    f"Use the local {preset_for(name).label} server instead", id=f"local-{name}"
                )
            yield Button(
                "Continue with the offline model" if offline else "Continue without a key",
                id="skip",
            )

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        button = event.button.id or ""
        if button == "save":
            await self._save(self.query_one("#key", Input).value)
        elif button.startswith("local-"):
            provider = button.removeprefix("local-")
            if self._saved(provider=provider):
                label = preset_for(provider).label
                self.notify(f"Using {label}; saved to {self.loaded.user_file}.")
                self.dismiss(True)
        else:
            self.dismiss(False)

    def action_skip(self) -> None:
        self.dismiss(False)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        await self._save(event.value)

    async def _save(self, key: str) -> None:
        key = key.strip()
        if not key:
            self.notify("Paste a key first", severity="warning")
            return
        if problem := key_problem(key):
            # Nothing is saved: the field is masked, so say what was typed into it.
            self.query_one("#key", Input).value = ""
            self.notify(
                f"That does not look like an API key: it {problem}. Paste the key from "
                "your provider's console, or press Esc to go on without one.",
                severity="warning",
            )
            return
        if self._saved(api_key=key):
            self.notify(f"Saved to {self.loaded.user_file}.")
            self.dismiss(True)

    def _saved(self, **values: str) -> bool:
        """Save `values` to the user config; if the disk refuses, say why and stay open."""
        try:
            save_user_settings(self.loaded, **values)
        except OSError as error:
            self.notify(
                f"Could not save to {self.loaded.user_file}: {error.strerror or error}. "
                "Free some space or fix the folder's permissions and try again, or press "
                "Esc and set the key in your environment instead.",
                severity="error",
                timeout=30,
            )
            return False
        return True
