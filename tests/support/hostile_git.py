"""Repositories whose config tries every way to make the app's own git run their code.

Every hook, filter, textconv, external diff, merge driver and fsmonitor command is one
script, which leaves a witness: a line in `markers` and a dump of its environment, both
in the witness folder and in the repository's git directory. The latter is where a
command sandboxed to write the git directory could still leave them, so a script run
inside the sandbox is caught too.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.git_repo import git, make_repo

# Hooks the app's git could trigger (checkout, ref updates, commits, the index, gc).
HOOKS = (
    "post-checkout",
    "reference-transaction",
    "pre-commit",
    "post-commit",
    "post-index-change",
    "post-rewrite",
    "pre-auto-gc",
)
ATTRIBUTES = "*.md filter=evil diff=evil merge=evil\n*.txt filter=long-running\n"
NOTES = "# Notes\n\nfirst line\n"
# A script for every purpose: it leaves its witness, then acts the part it was called as
# (a filter passes content through, a textconv prints the file, a hook drains its input;
# a merge driver or long-running filter fails, the latter before git waits on its answer).
SCRIPT = """#!/bin/sh
kind="$1"
shift
git_dir=$(git rev-parse --git-common-dir 2>/dev/null)
for place in "{witness}" "$git_dir"; do
    [ -n "$place" ] || continue
    echo "$kind $*" >> "$place/markers" 2>/dev/null
    env > "$place/env.$kind.$$" 2>/dev/null
done
case "$kind" in
    clean|smudge) exec cat ;;
    textconv) exec cat "$1" ;;
    merge|process) exit 1 ;;
    *) cat > /dev/null 2>&1 ;;
esac
"""


def hostile_repo(root: Path, witness: Path, *, husky: bool = False) -> Path:
    """A committed repository, then armed: as an attacker writes `.git/config` (committed
    hooks, filters and drivers), or (`husky`) as a user points core.hooksPath at `.husky`."""
    witness.mkdir(parents=True, exist_ok=True)
    hooks = ".husky" if husky else ".githooks"
    files = {"notes.md": NOTES, "calc.py": "x = 1\n", "data.txt": "data\n"}
    if not husky:
        files[".gitattributes"] = ATTRIBUTES
    files |= {
        f"{hooks}/{name}": f'#!/bin/sh\nexec "$(dirname "$0")/mark" {name} "$@"\n' for name in HOOKS
    }
    files[f"{hooks}/mark"] = SCRIPT.format(witness=witness)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for script in (root / hooks).iterdir():
        script.chmod(0o755)
    repo = make_repo(root).resolve()
    # Armed only now: the test's own git above must not trip the scripts.
    git(repo, "config", "core.hooksPath", hooks)
    if husky:
        return repo
    mark = repo / hooks / "mark"
    for key, command in (
        ("filter.evil.clean", f"{mark} clean %f"),
        ("filter.evil.smudge", f"{mark} smudge %f"),
        ("filter.evil.required", "true"),
        ("filter.long-running.process", f"{mark} process"),
        ("diff.evil.textconv", f"{mark} textconv"),
        ("diff.evil.command", f"{mark} diff-command"),
        ("merge.evil.driver", f"{mark} merge %O %A %B"),
        ("diff.external", f"{mark} diff-external"),
        ("core.fsmonitor", f"{mark} fsmonitor"),
    ):
        git(repo, "config", key, command)
    return repo


def traces(witness: Path, repo: Path) -> list[str]:
    """Every marker line and environment dump the scripts left, wherever they could."""
    found = []
    for place in (witness, repo / ".git"):
        markers = place / "markers"
        if markers.exists():
            found += markers.read_text().splitlines()
        found += [dump.name for dump in place.glob("env.*")]
    return found
