"""Worktrees for isolated children, against real git in temporary repositories."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from codewhale.subagents import worktree
from codewhale.subagents.definitions import DefinitionParseError, parse_definition
from codewhale.subagents.isolation import WorktreeKeeper
from codewhale.subagents.records import WorkerRecord, now_ms, snapshot_of_record
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.worktree import Isolation, Worktree, WorktreeError
from tests.support.git_repo import branches, git, make_repo, tree_state

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def repo(tmp_path) -> Path:
    root = make_repo(
        tmp_path / "repo",
        {"calc.py": CALC, "gone.py": "x = 1\n", ".gitignore": "*.log\nbuild/\n", "pkg/m.py": ""},
    )
    return root.resolve()


def made(repo: Path, directory: Path | None = None, nickname: str = "Moby") -> Worktree:
    prepared = worktree.create(directory or repo)
    return worktree.name_branch(prepared.tree, nickname)


def test_the_repositorys_fsmonitor_hook_never_runs(repo, tmp_path):
    # A repository's config is not trusted (as for the file walk): core.fsmonitor names a
    # command git would run on reading the index.
    marker = tmp_path / "hook-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(hook))
    (repo / "calc.py").write_text(CALC + "# edited\n")

    tree = made(repo)
    (Path(tree.path) / "calc.py").write_text(CALC.replace("a + b", "a * b"))
    worktree.summarize(tree)

    assert not marker.exists()


def test_a_worktree_starts_from_head_plus_every_uncommitted_change(repo):
    (repo / "calc.py").write_text(CALC + "\n# edited, not staged\n")
    (repo / "pkg" / "m.py").write_text("staged = True\n")
    git(repo, "add", "pkg/m.py")
    (repo / "gone.py").unlink()
    (repo / "notes.txt").write_text("untracked\n")
    (repo / "debug.log").write_text("ignored\n")
    (repo / ".codewhale" / "state").mkdir(parents=True)
    (repo / ".codewhale" / "state" / "subagents.v1.json").write_text("{}")
    (repo / ".codewhale" / "config.toml").write_text("# project config\n")
    before, status = tree_state(repo), git(repo, "status", "--porcelain")

    prepared = worktree.create(repo)
    tree = worktree.name_branch(prepared.tree, "Moby")
    path = Path(tree.path)

    assert path.parent == repo / ".git" / "codewhale-worktrees"
    assert prepared.workspace == path
    assert (path / "calc.py").read_text().endswith("# edited, not staged\n")
    assert (path / "pkg" / "m.py").read_text() == "staged = True\n"
    assert (path / "notes.txt").read_text() == "untracked\n"
    assert (path / ".codewhale" / "config.toml").is_file()
    assert not (path / "gone.py").exists()
    assert not (path / "debug.log").exists()  # ignored files are not carried
    assert not (path / ".codewhale" / "state").exists()  # nor CodeWhale's own state
    # The user's files, index and status are exactly as they were; the worktree is hidden.
    assert tree_state(repo) == before
    assert git(repo, "status", "--porcelain") == status
    assert tree.branch == "codewhale/moby" and "codewhale/moby" in branches(repo)
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "codewhale/moby"
    assert tree.head_commit == git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "rev-parse", f"{tree.base_commit}^").strip() == tree.head_commit
    assert git(path, "status", "--porcelain") == ""  # the base is exactly what it holds


def test_a_cwd_maps_to_the_same_directory_in_the_worktree(repo):
    prepared = worktree.create(repo / "pkg")
    assert prepared.workspace == Path(prepared.tree.path) / "pkg"
    assert (prepared.workspace / "m.py").is_file()
    # Only the child's own directory counts: a change elsewhere (a shell command that
    # stepped out, say) is neither summarised nor applied.
    (prepared.workspace / "m.py").write_text("inside = 1\n")
    (Path(prepared.tree.path) / "calc.py").write_text("outside\n")
    tree = worktree.name_branch(prepared.tree, "Moby")
    assert [change.path for change in worktree.summarize(tree).files] == ["pkg/m.py"]
    assert worktree.apply(tree).applied
    assert (repo / "pkg" / "m.py").read_text() == "inside = 1\n"
    assert (repo / "calc.py").read_text() == CALC
    (repo / "build").mkdir()  # ignored: not in the checkout, made for the child
    assert worktree.create(repo / "build").workspace.is_dir()


def test_a_repository_without_commits_works_too(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("first\n")
    tree = made(root.resolve())
    assert tree.head_commit is None
    assert (Path(tree.path) / "a.txt").read_text() == "first\n"


def test_outside_a_repository_the_error_names_the_problem_and_the_fix(tmp_path):
    with pytest.raises(WorktreeError) as caught:
        worktree.create(tmp_path)
    message = str(caught.value)
    assert 'isolation "worktree" needs a git repository' in message
    assert str(tmp_path) in message and "git init" in message
    assert "without isolation" in message


def test_a_work_tree_moved_by_core_worktree_is_refused(repo, tmp_path):
    # The repository's config could aim git's snapshot and apply at any folder above it.
    git(repo, "config", "core.worktree", str(tmp_path))
    with pytest.raises(WorktreeError) as caught:
        worktree.create(repo)
    message = str(caught.value)
    assert f"git takes {tmp_path.resolve()} as the work tree" in message
    assert "git config --unset core.worktree" in message
    assert not (repo / ".git" / worktree.WORKTREES_DIR).exists()


def test_branch_names_follow_the_nickname_and_stay_unique(repo):
    first, second = made(repo), made(repo)
    assert (first.branch, second.branch) == ("codewhale/moby", "codewhale/moby-2")
    assert made(repo, nickname="Old Tom").branch == "codewhale/old-tom"


def test_the_summary_counts_lines_per_file_and_marks_binary_files(repo):
    tree = made(repo)
    path = Path(tree.path)
    (path / "calc.py").write_text(CALC.replace("a + b", "a + b + 0") + "# more\n")
    (path / "logo.png").write_bytes(b"\x89PNG\x00\x01\x02")
    (path / "gone.py").unlink()
    summary = worktree.summarize(tree)
    files = {change.path: (change.added, change.deleted) for change in summary.files}
    assert files == {"calc.py": (2, 1), "gone.py": (0, 1), "logo.png": (None, None)}
    assert (summary.files_changed, summary.added, summary.deleted) == (3, 2, 2)
    assert summary.line() == "3 files changed, +2 −2"
    assert worktree.DiffSummary.from_json(summary.to_json()) == summary


def test_apply_merges_with_what_changed_in_the_work_tree_meanwhile(repo):
    tree = made(repo)
    path = Path(tree.path)
    (path / "calc.py").write_text(CALC.replace("a - b", "b - a"))
    (path / "pkg" / "new.py").write_text("created = 1\n")
    (path / "gone.py").unlink()
    # Meanwhile the user edits another part of the same file, and stages something.
    (repo / "calc.py").write_text(CALC.replace("a + b", "b + a"))
    (repo / "other.txt").write_text("mine\n")
    git(repo, "add", "other.txt")
    index_before = (repo / ".git" / "index").read_bytes()

    outcome = worktree.apply(tree)

    assert outcome.applied and outcome.changes.files_changed == 3
    assert (repo / "calc.py").read_text() == CALC.replace("a + b", "b + a").replace(
        "a - b", "b - a"
    )
    assert (repo / "pkg" / "new.py").read_text() == "created = 1\n"
    assert not (repo / "gone.py").exists()
    # Written to the files only: the user's index (their staging) is untouched.
    assert (repo / ".git" / "index").read_bytes() == index_before


def test_a_conflict_changes_nothing_and_names_the_files(repo):
    first, second = made(repo), made(repo, nickname="Humphrey")
    for tree, text in ((first, "a * b"), (second, "a ** b")):
        (Path(tree.path) / "calc.py").write_text(CALC.replace("a + b", text))
        (Path(tree.path) / "fine.txt").write_text(f"{text}\n")
    assert worktree.apply(first).applied
    before = tree_state(repo)

    outcome = worktree.apply(second)

    assert not outcome.applied
    assert outcome.conflicts == ("calc.py", "fine.txt")
    assert tree_state(repo) == before
    assert not (repo / "calc.py.orig").exists() and "<<<<<<<" not in (repo / "calc.py").read_text()


def test_a_new_file_clashing_with_an_untracked_one_is_a_conflict(repo):
    tree = made(repo)
    (Path(tree.path) / "new.txt").write_text("theirs\n")
    (repo / "new.txt").write_text("ours\n")
    before = tree_state(repo)
    outcome = worktree.apply(tree)
    assert not outcome.applied and outcome.conflicts == ("new.txt",)
    assert tree_state(repo) == before


def test_nothing_to_apply_is_said_plainly(repo):
    outcome = worktree.apply(made(repo))
    assert not outcome.applied and outcome.detail == "the sub-agent changed nothing"


def test_remove_deletes_the_worktree_and_its_branch(repo):
    tree = made(repo)
    (Path(tree.path) / "scratch.txt").write_text("unsaved work\n")
    worktree.remove(tree)
    assert not Path(tree.path).exists()
    assert "codewhale/moby" not in branches(repo)
    assert git(repo, "worktree", "list").count("\n") == 1
    worktree.remove(tree)  # twice: nothing left to do, no error


# -- the keeper: records, ages and choices -------------------------------------------------


def record_with(tree: Worktree, status: str, finished_hours_ago: float) -> WorkerRecord:
    record = WorkerRecord(
        run_id="run_1",
        agent_id=f"agent_{Path(tree.path).name}",
        name="n",
        nickname="Moby",
        objective="o",
        description="d",
        type="implementer",
        role="implementer",
        model="m",
        workspace=tree.path,
        git_branch=tree.branch,
        session_boot_id="boot_x",
        status=status,
        worker_status=status,
        finished_at_ms=now_ms() - int(finished_hours_ago * 3_600_000),
    )
    record.worktree = tree.to_json()
    return record


def test_prune_deletes_finished_worktrees_past_the_age_and_nothing_else(repo):
    keeper = WorktreeKeeper(keep_hours=24, persist=lambda record: None)
    old = record_with(made(repo, nickname="old"), "completed", 25)
    young = record_with(made(repo, nickname="young"), "completed", 23)
    kept = record_with(replace(made(repo, nickname="kept"), keep=True), "failed", 100)
    paused = record_with(made(repo, nickname="paused"), "interrupted", 100)
    closed = record_with(made(repo, nickname="closed"), "cancelled", 30)

    pruned = keeper.prune([old, young, kept, paused, closed])

    assert pruned == ["codewhale/old", "codewhale/closed"]
    assert set(branches(repo)) == {"main", "codewhale/young", "codewhale/kept", "codewhale/paused"}
    for record in (old, closed):
        assert Worktree.from_json(record.worktree or {}).removed_at_ms is not None
        assert not Path(record.workspace).exists()
    assert Path(young.workspace).is_dir() and Path(kept.workspace).is_dir()
    assert keeper.prune([old, young, kept, paused, closed]) == []  # already gone


async def test_keeper_applies_once_and_remembers_it(repo):
    tree = made(repo)
    (Path(tree.path) / "calc.py").write_text("changed\n")
    record = record_with(tree, "completed", 0)
    written: list[str] = []
    keeper = WorktreeKeeper(keep_hours=24, persist=lambda r: written.append(r.agent_id))
    keeper.summarize(record)
    assert snapshot_of_record(record).applicable
    assert "1 file changed" in snapshot_of_record(record).worktree

    both = await asyncio.gather(keeper.apply(record), keeper.apply(record), return_exceptions=True)

    assert sum(isinstance(result, dict) and result["applied"] for result in both) == 1
    refused = next(result for result in both if isinstance(result, SpawnError))
    assert "already applied" in str(refused)
    assert (repo / "calc.py").read_text() == "changed\n"
    assert written and not snapshot_of_record(record).applicable
    assert record.projection()["worktree"]["applied"] is True


async def test_apply_refuses_a_running_or_shared_tree_child(repo):
    keeper = WorktreeKeeper(keep_hours=24, persist=lambda record: None)
    running = record_with(made(repo), "running", 0)
    with pytest.raises(SpawnError, match="still running"):
        await keeper.apply(running)
    shared = record_with(made(repo, nickname="x"), "completed", 0)
    shared.worktree = None
    with pytest.raises(SpawnError, match="not opened with isolation: worktree"):
        await keeper.apply(shared)


async def test_an_open_cancelled_during_the_checkout_leaves_no_worktree(repo):
    keeper = WorktreeKeeper(keep_hours=24, persist=lambda record: None)
    opening = asyncio.create_task(keeper.prepare_in_thread(repo))
    await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    folder = repo / ".git" / worktree.WORKTREES_DIR

    def settled() -> bool:
        listed = git(repo, "worktree", "list").count("\n") == 1
        return folder.is_dir() and not any(folder.iterdir()) and listed

    for _ in range(200):
        if settled():
            break
        await asyncio.sleep(0.05)
    assert settled()


# -- isolation in agent files --------------------------------------------------------------


def test_isolation_parses_in_agent_files_and_arguments():
    text = "---\nname: iso\ndescription: d\nisolation: worktree\n---\nbody"
    assert parse_definition(text, "x.md", frozenset()).isolation is Isolation.WORKTREE
    plain = parse_definition("---\nname: p\ndescription: d\n---\nbody", "p.md", frozenset())
    assert plain.isolation is Isolation.NONE
    with pytest.raises(DefinitionParseError) as caught:
        parse_definition(
            "---\nname: iso\ndescription: d\nisolation: sandbox\n---\nb", "x.md", frozenset()
        )
    assert caught.value.line == 4
    assert caught.value.reason == 'isolation must be "worktree" or "none", not \'sandbox\''
    assert Isolation.parse(" WorkTree ") is Isolation.WORKTREE
