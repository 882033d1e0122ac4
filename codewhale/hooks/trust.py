"""The user's trust in a project's hooks, per workspace: each command pinned to a digest of
its file, event, matcher and command, so a command the repository changes is asked again."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from codewhale.digest_trust import DigestTrustStore
from codewhale.hooks.settings import HookEntry


def trust_file(state_dir: Path) -> Path:
    return state_dir / "hooks-trust.json"


def waiting_notice(count: int) -> str:
    """The session's warning while a project's hooks wait for trust (the app asks instead)."""
    return (
        f"{count} hook(s) in this project's files do not run until you trust them: "
        "review them with /hooks (or `codewhale hooks list`), then /hooks trust"
    )


class HookTrust:
    """`<state dir>/hooks-trust.json`; user hooks need no trust."""

    def __init__(self, path: Path) -> None:
        self._digests = DigestTrustStore(path)

    def trusted_digests(self, workspace: Path) -> set[str]:
        return set(self._digests.remembered(workspace))

    def trust(self, workspace: Path, entries: Iterable[HookEntry]) -> None:
        # The name is the digest; the value keeps the command readable in the file.
        self._digests.trust(
            workspace, {entry.digest: entry.command for entry in entries if entry.project}
        )

    def revoke(self, workspace: Path) -> None:
        self._digests.revoke(workspace, self.trusted_digests(workspace))
