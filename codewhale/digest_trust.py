"""What a user has trusted in a workspace, each name pinned to the digest of what they saw.

A repository can ship files that change what the app does on the user's behalf; the
app uses them only once the user has said yes. Remembering the digest, not just the
name, means a file the repository changes later is asked about again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

from codewhale.atomic import atomic_write_text
from codewhale.private_files import FILE_MODE, private_dir

VERSION = 1


class DigestTrustStore:
    """A JSON file: {"version": 1, "workspaces": {workspace path: {name: digest}}}."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remembered(self, workspace: Path) -> dict[str, str]:
        """The digests trusted in this workspace, by name."""
        return self._read().get(str(workspace.resolve()), {})

    def trust(self, workspace: Path, digests: Mapping[str, str]) -> None:
        self._update(workspace, dict(digests), ())

    def revoke(self, workspace: Path, names: Iterable[str]) -> None:
        self._update(workspace, {}, names)

    def _update(self, workspace: Path, add: dict[str, str], remove: Iterable[str]) -> None:
        # Read, change and write under a lock: two sessions trusting at once keep both.
        private_dir(self.path.parent)
        with FileLock(self.path.with_name(self.path.name + ".lock"), mode=FILE_MODE):
            workspaces = self._read()
            key = str(workspace.resolve())
            entries = {**workspaces.get(key, {}), **add}
            for name in remove:
                entries.pop(name, None)
            workspaces[key] = entries
            document = {"version": VERSION, "workspaces": workspaces}
            atomic_write_text(self.path, json.dumps(document, indent=2, sort_keys=True) + "\n")

    def _read(self) -> dict[str, dict[str, str]]:
        """What is remembered; an unreadable file trusts nothing (the user is asked again)."""
        try:
            document: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        workspaces = document.get("workspaces") if isinstance(document, dict) else None
        if not isinstance(workspaces, dict):
            return {}
        return {
            str(path): {str(name): str(digest) for name, digest in entries.items()}
            for path, entries in workspaces.items()
            if isinstance(entries, dict)
        }
