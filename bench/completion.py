"""`@` completion in a 20,000-file git repository: the index against the old walk per keystroke.

One run builds a repository of 20,000 files (plus `.codewhale/` state, which must never
be offered), then measures, for the same typed queries (each prefix of each word, as a
person types them):

- before: what the composer did until now on every keystroke: list the tree with
  `iter_files` and score every path with `fuzzy_score`, on the event loop;
- after: `FileIndex.matches` over the index, built once in a thread.

It also reports how long the index takes to build and how late a 5 ms event-loop timer
fires while it builds in the background (the build must not block typing).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from codewhale.tools.search import fuzzy_score
from codewhale.tools.walk import LISTING_TTL_SECS, iter_files
from codewhale.tui.file_index import FileIndex

FILES = 20_000
WORDS = ("src/handlers/auth", "config", "session", "readme", "widgets/tab", "file_12345")
# The old walk takes seconds a keystroke; this many of its keystrokes are timed.
OLD_KEYSTROKES = 8
TIMER_SECS = 0.005
DIRECTORIES = ("src", "lib", "tests", "docs", "api", "core", "ui", "handlers", "models", "utils")
NAMES = ("auth", "config", "views", "router", "widgets", "tab", "client", "server", "db")
SUFFIXES = (".py", ".ts", ".md", ".json", ".go")


def make_repository(root: Path) -> None:
    for number in range(FILES):
        parts = [
            DIRECTORIES[(number * 7 + depth) % len(DIRECTORIES)] for depth in range(number % 4)
        ]
        name = f"{NAMES[number % len(NAMES)]}_file_{number}{SUFFIXES[number % len(SUFFIXES)]}"
        path = root.joinpath(*parts, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{number}\n")
    (root / "README.md").write_text("bench\n")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "bench"], check=True)
    # Session state as CodeWhale leaves it: untracked and not ignored, so git lists it.
    state = root / ".codewhale"
    state.mkdir()
    for number in range(50):
        (state / f"session_{number}.jsonl").write_text("{}\n")


def typed_queries() -> list[str]:
    return [word[:length] for word in WORDS for length in range(1, len(word) + 1)]


def old_matches(root: Path, query: str, limit: int) -> list[str]:
    """The composer's matching before the index, as it ran on every keystroke."""
    scored = sorted(
        (-score, relative)
        for path in iter_files(root)
        if (score := fuzzy_score(query, relative := path.relative_to(root).as_posix())) is not None
    )
    return [relative for _, relative in scored[:limit]]


def timed(work) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def loop_stalls_while_building(index: FileIndex) -> tuple[float, float]:
    """(build seconds, the latest a 5 ms timer fired, ms) with the build in a thread."""
    done = threading.Event()
    started = time.perf_counter()
    index.refresh(on_done=done.set)
    worst = 0.0
    while not done.is_set():
        before = time.perf_counter()
        await asyncio.sleep(TIMER_SECS)
        worst = max(worst, (time.perf_counter() - before - TIMER_SECS) * 1000)
    return time.perf_counter() - started, worst


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve()
        make_repository(root)
        queries = typed_queries()
        index = FileIndex(root)
        build_secs, stall_ms = asyncio.run(loop_stalls_while_building(index))
        after = [timed(lambda q=query: index.matches(q, 6)) for query in queries]
        offered = [path for query in queries for path in index.matches(query, 6)]
        assert not any(path.startswith(".codewhale/") for path in offered)
        # Spread over the words, so short and long queries both count.
        step = max(1, len(queries) // OLD_KEYSTROKES)
        sample = queries[::step][:OLD_KEYSTROKES]
        before = [timed(lambda q=query: old_matches(root, q, 6)) for query in sample]
        # git's listing is cached for LISTING_TTL_SECS: a keystroke after a pause re-lists.
        time.sleep(LISTING_TTL_SECS + 0.1)
        cold = timed(lambda: old_matches(root, "session", 6))
        leaked = sum(path.startswith(".codewhale/") for path in old_matches(root, "session", 6))
    after_p50, after_p95 = statistics.median(after), percentile(after, 0.95)
    before_p50, before_p95 = statistics.median(before), percentile(before, 0.95)
    print(
        f"completion: {FILES} files  index built in {build_secs * 1000:.0f} ms off the loop "
        f"(a {TIMER_SECS * 1000:.0f} ms timer fired at most {stall_ms:.1f} ms late meanwhile)"
    )
    print(
        f"completion: per keystroke ({len(after)} typed queries)  index p50 {after_p50:.1f} ms  "
        f"p95 {after_p95:.1f} ms  (target p95 < 50 ms)"
    )
    print(
        f"completion: old full walk ({len(before)} keystrokes)  p50 {before_p50:.0f} ms  "
        f"p95 {before_p95:.0f} ms  ->  {before_p50 / after_p50:.0f}x the index at p50, "
        f"{before_p95 / after_p95:.0f}x at p95"
    )
    print(
        f"completion: old full walk after a pause (git re-lists) {cold:.0f} ms; for 'session' "
        f"it offered {leaked} .codewhale/ paths of 6, the index none"
    )


if __name__ == "__main__":
    main()
