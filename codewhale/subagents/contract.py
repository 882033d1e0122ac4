"""Parse a child's final message into the five-section report, and check its claims."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codewhale.gitrun import GitError, run_git

SECTIONS = ("summary", "changes", "evidence", "risks", "blockers")
# A status that takes longer leaves the report unchecked.
STATUS_TIMEOUT_SECS = 10
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?\**(SUMMARY|CHANGES|EVIDENCE|RISKS|BLOCKERS)\**[ \t]*:?\**[ \t]*",
    re.MULTILINE,
)
REMINDER = (
    "Your final message did not follow the output contract. Restate your result now, ending "
    "with the five sections in this order: SUMMARY, CHANGES, EVIDENCE, RISKS, BLOCKERS."
)


def parse_report(text: str) -> dict[str, Any]:
    """The sections found; `well_formed` only when all five appear once, in order."""
    matches = list(_HEADING.finditer(text))
    found = [match.group(1).lower() for match in matches]
    report: dict[str, Any] = {name: "" for name in SECTIONS}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        report[match.group(1).lower()] = text[match.end() : end].strip()
    # The contract closes the message, so the last five headings are the ones that count.
    report["well_formed"] = found[-5:] == list(SECTIONS) and len(set(found)) == 5
    if not report["well_formed"]:
        report["raw"] = text
    return report


_PATH = re.compile(r"[\w./-]+\.[\w]+|[\w-]+/[\w./-]+")


def claimed_files(changes: str) -> list[str]:
    """File paths listed under CHANGES ("None." means none)."""
    if not changes.strip() or changes.strip().lower().rstrip(".") == "none":
        return []
    files = []
    for line in changes.splitlines():
        match = _PATH.search(line.strip(" -*`"))
        if match and match.group(0) not in files:
            files.append(match.group(0).strip("`").rstrip(".:,"))
    return files


def verify_claims(workspace: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Compare claimed changes with `git status --porcelain` when the workspace is a repo."""
    claimed = claimed_files(report.get("changes", ""))
    # Through the app's git runner: the repository's hooks, filters and config run nothing.
    # A submodule's own work tree is not looked into: git would run there under that
    # submodule's config.
    command = ["status", "--porcelain", "--untracked-files=all", "--ignore-submodules=dirty"]
    try:
        result = run_git(command, workspace, timeout=STATUS_TIMEOUT_SECS)
    except GitError:
        return {"status": "self_report_only"}
    if result.returncode != 0:
        return {"status": "self_report_only"}
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    changed = {line[3:].split(" -> ")[-1].strip('"') for line in lines}
    missing = [path for path in claimed if path not in changed]
    if claimed and missing:
        return {"status": "claim_mismatch", "claimed": claimed, "not_in_git_status": missing}
    return {"status": "self_report_only", "git_checked": True}
