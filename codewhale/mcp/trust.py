"""The user's trust in a project's MCP servers, remembered per workspace.

A cloned repository's `.mcp.json` names programs to run; none starts until the user has
said yes to it once. What is remembered is the entry's digest, so an entry the project
later changes (another command, other arguments) is asked about again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from filelock import FileLock

from codewhale.atomic import atomic_write_text
from codewhale.mcp.specs import ServerSpec

VERSION = 1


class TrustStore:
    """`<state dir>/mcp-trust.json`: {"version": 1, "workspaces": {path: {server: digest}}}."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def trusted(self, workspace: Path, spec: ServerSpec) -> bool:
        """Config servers are the user's own; a project server needs its digest remembered."""
        if not spec.project:
            return True
        return self._read().get(str(workspace.resolve()), {}).get(spec.name) == spec.digest

    def trust(self, workspace: Path, specs: Iterable[ServerSpec]) -> None:
        self._update(workspace, {spec.name: spec.digest for spec in specs if spec.project}, ())

    def revoke(self, workspace: Path, names: Iterable[str]) -> None:
        self._update(workspace, {}, names)

    def _update(self, workspace: Path, add: dict[str, str], remove: Iterable[str]) -> None:
        # Read, change and write under a lock: two sessions trusting at once keep both.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(self.path.with_name(self.path.name + ".lock")):
            workspaces = self._read()
            entries = {**workspaces.get(str(workspace.resolve()), {}), **add}
            for name in remove:
                entries.pop(name, None)
            workspaces[str(workspace.resolve())] = entries
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
            str(path): {str(k): str(v) for k, v in entries.items()}
            for path, entries in workspaces.items()
            if isinstance(entries, dict)
        }
