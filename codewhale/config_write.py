"""Writing the user's config file without losing what they wrote: comments, order, layout.

tomllib only reads and tomli-w rewrites from plain data, which drops every comment;
tomlkit edits the parsed document in place, so a saved key lands beside the user's
own notes. Writes are atomic with mode 0600 (the file may hold an API key).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit

from codewhale.atomic import atomic_write_text


def update_config_file(path: Path, values: Mapping[str, Any]) -> None:
    """Set top-level `values` in the TOML file at `path` (created if missing), keeping the rest.

    A table in `values` is merged key by key into the file's table of that name.
    """
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    document = tomlkit.parse(text)
    _merge(document, values)
    atomic_write_text(path, tomlkit.dumps(document), mode=0o600)


def _merge(table: Any, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        existing = table.get(key)
        if isinstance(value, Mapping) and isinstance(existing, Mapping):
            _merge(existing, value)
        else:
            table[key] = value
