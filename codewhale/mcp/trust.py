"""The user's trust in a project's MCP servers, remembered per workspace.

A cloned repository's `.mcp.json` names programs to run; none starts until the user has
said yes to it once. What is remembered is the entry's digest, so an entry the project
later changes (another command, other arguments) is asked about again.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from codewhale.digest_trust import DigestTrustStore
from codewhale.mcp.specs import ServerSpec


class TrustStore:
    """`<state dir>/mcp-trust.json`: each project server's digest, per workspace."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._digests = DigestTrustStore(path)

    def trusted(self, workspace: Path, spec: ServerSpec) -> bool:
        """Config servers are the user's own; a project server needs its digest remembered."""
        if not spec.project:
            return True
        return self._digests.remembered(workspace).get(spec.name) == spec.digest

    def trust(self, workspace: Path, specs: Iterable[ServerSpec]) -> None:
        self._digests.trust(workspace, {spec.name: spec.digest for spec in specs if spec.project})

    def revoke(self, workspace: Path, names: Iterable[str]) -> None:
        self._digests.revoke(workspace, names)
