"""Worktree isolation on a 20,000-file repository: what making, summarising and applying cost.

The repository holds 20,000 committed files (200 folders of 100 small modules) and the
uncommitted work of a session in progress: 50 tracked files edited, 50 new untracked
files. Measured, in alternating order, medians of several runs:

- a plain `git worktree add --detach` of HEAD: the baseline, which carries none of the
  uncommitted work;
- what `isolation: worktree` does for agent_open: the snapshot of HEAD plus the
  uncommitted work (a temporary index), its base commit, the checkout, and the branch;
- its parts: the snapshot, and naming the branch (the part that runs on the event loop);
- the diff summary made when an isolated child ends (in a thread, before its completion
  event; on the loop only for a child stopped from outside), after it changed 20 files;
- agent_apply of those 20 files.

The ratio of the first two is the overhead of carrying the uncommitted work.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.targets import target
from codewhale.subagents import worktree

FOLDERS, FILES_PER_FOLDER = 200, 100
EDITED, UNTRACKED, CHILD_CHANGES = 50, 50, 20
RUNS = 5
# Carrying the uncommitted work may cost at most this much over a plain checkout.
TARGET_RATIO = 1.3
# What an isolated child costs the event loop: branch naming when it opens (at 20,000
# files; its diff summary runs in a thread).
TARGET_ON_LOOP_MS = 100.0
T = TypeVar("T")
_ENV = {
    **{key: value for key, value in os.environ.items() if not key.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, env=_ENV, capture_output=True, check=True)
    return done.stdout.decode()


def module(folder: int, number: int) -> str:
    return f'"""Module {folder}.{number}."""\n\n\ndef f_{number}(x):\n    return x + {number}\n'


def build(root: Path) -> None:
    """20,000 committed files, then a session's uncommitted work on top."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for folder in range(FOLDERS):
        directory = root / f"pkg{folder:03d}"
        directory.mkdir()
        for number in range(FILES_PER_FOLDER):
            (directory / f"m{number:03d}.py").write_text(module(folder, number))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "20,000 files")
    for n in range(EDITED):
        path = root / f"pkg{n:03d}" / "m000.py"
        path.write_text(path.read_text() + "# edited in the session\n")
    for n in range(UNTRACKED):
        (root / f"pkg{n:03d}" / f"new{n}.py").write_text("draft = True\n")
    git(root, "status", "--porcelain")  # as a user's tools would: the index's stat data is fresh


def timed(action: Callable[..., T], *args: Any) -> tuple[float, T]:
    """(seconds, result) of one call."""
    started = time.perf_counter()
    result = action(*args)
    return time.perf_counter() - started, result


def isolate(root: Path, nickname: str) -> worktree.Worktree:
    """What agent_open does for isolation: worktree (its thread part, then the branch)."""
    return worktree.name_branch(worktree.create(root).tree, nickname)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="codewhale-bench-worktree-") as folder:
        root = Path(folder) / "repo"
        started = time.perf_counter()
        build(root)
        built = time.perf_counter() - started
        print(f"repository: {FOLDERS * FILES_PER_FOLDER} files, built in {built:.1f} s")
        repo = worktree.repository_of(root)
        plain, isolated, snapshots, naming = [], [], [], []
        for run in range(RUNS):
            path = str(Path(folder) / f"plain{run}")

            def measure_plain(path: str = path) -> None:
                plain.append(timed(git, root, "worktree", "add", "-q", "--detach", path)[0])
                git(root, "worktree", "remove", "--force", path)

            def measure_isolated() -> None:
                seconds, tree = timed(isolate, root, "m")
                isolated.append(seconds)
                worktree.remove(tree)

            # Alternating which goes first, so a warmer cache favours neither.
            pair = (measure_plain, measure_isolated)
            for measure in pair if run % 2 == 0 else reversed(pair):
                measure()
            snapshots.append(timed(worktree.snapshot, repo)[0])
            prepared = worktree.create(root)
            seconds, tree = timed(worktree.name_branch, prepared.tree, "n")
            naming.append(seconds)
            worktree.remove(tree)

        tree = isolate(root, "child")
        for n in range(CHILD_CHANGES):
            edited = Path(tree.path) / f"pkg{100 + n:03d}" / "m001.py"
            edited.write_text(edited.read_text().replace("x +", "x -"))
        summaries = [timed(worktree.summarize, tree)[0] for _ in range(RUNS)]
        applying, outcome = timed(worktree.apply, tree)
        assert outcome.applied and outcome.changes.files_changed == CHILD_CHANGES
        worktree.remove(tree)

    base, full = statistics.median(plain), statistics.median(isolated)
    print(f"plain git worktree add --detach HEAD: {base * 1000:8.1f} ms (median of {RUNS})")
    print(f"isolation: worktree (HEAD + uncommitted): {full * 1000:8.1f} ms")
    print(f"  snapshot of the uncommitted work:   {statistics.median(snapshots) * 1000:8.1f} ms")
    print(f"  naming the branch (on the loop):    {statistics.median(naming) * 1000:8.1f} ms")
    summary = statistics.median(summaries)
    print(f"diff summary at a child's end (in a thread): {summary * 1000:8.1f} ms")
    print(f"agent_apply of {CHILD_CHANGES} changed files: {applying * 1000:8.1f} ms")
    target(
        "worktree creation / plain git worktree add (20,000 files)", full / base, "≤", TARGET_RATIO
    )
    on_loop = statistics.median(naming) * 1000
    target("an isolated child's time on the event loop", on_loop, "<", TARGET_ON_LOOP_MS, " ms")


if __name__ == "__main__":
    main()
