"""One answer, everywhere, to "the provider needs an API key and none is set"."""

from __future__ import annotations

from pathlib import Path

from codewhale.providers.local_model import INSTALL_HINT, missing_local_runtime
from codewhale.providers.presets import preset_for
from codewhale.providers.settings import ProviderSettings


def lacks_key(settings: ProviderSettings) -> bool:
    return not settings.api_key and preset_for(settings.provider).needs_key


def missing_key_help(settings: ProviderSettings, user_file: Path | None = None) -> str:
    """What is missing and the three ways to fix it (a key in the env, in config, offline)."""
    preset = preset_for(settings.provider)
    key_env = preset.key_env or "CODEWHALE_API_KEY"
    where = str(user_file) if user_file else "your user config (`codewhale config path`)"
    if missing_local_runtime():
        offline = f"to work offline (chat only, no key): {INSTALL_HINT}"
    else:
        offline = "to work offline (chat only, no key): `codewhale --provider local`."
    return (
        f"{preset.label} needs an API key and none is configured. Either\n"
        f"  - export {key_env}=<your key> (or CODEWHALE_API_KEY), or\n"
        f'  - put api_key = "<your key>" in {where} '
        "(`codewhale config init` writes one with every key), or\n"
        f"  - {offline}"
    )
