"""The app's git runner against real git: its environment, its overrides, its sandbox."""

from __future__ import annotations

import pytest

from codewhale import gitrun
from codewhale.gitrun import GitMissing, git_environment, run_git
from codewhale.sandbox import sandbox_status
from tests.support.git_repo import git, make_repo
from tests.support.hostile_git import NOTES, hostile_repo, traces

SANDBOX = sandbox_status()
NEEDS_SANDBOX = (
    pytest.mark.sandbox,
    pytest.mark.skipif(not SANDBOX.available, reason=f"no sandbox here: {SANDBOX.reason}"),
)
KEY = "sk-gitrun-canary-93be"


@pytest.fixture(params=[False, pytest.param(True, marks=NEEDS_SANDBOX)], ids=["bare", "sandboxed"])
def sandboxed(request):
    gitrun.follow_sandbox_setting(request.param)
    yield request.param
    gitrun.follow_sandbox_setting("auto")


@pytest.fixture
def keys_and_redirects(monkeypatch, tmp_path):
    """The app's own environment at its worst: keys, and git variables aimed elsewhere."""
    for name in ("CODEWHALE_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, KEY)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "other-index"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/tmp'")


def test_the_environment_holds_no_key_and_no_redirect(keys_and_redirects):
    env = git_environment([], {"GIT_INDEX_FILE": "/the/callers/index"})
    assert KEY not in env.values()
    assert not {"GIT_DIR", "GIT_CONFIG_PARAMETERS"} & env.keys()
    assert env["GIT_INDEX_FILE"] == "/the/callers/index"  # named by the caller: kept
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"


def test_a_process_git_starts_sees_no_key(tmp_path, keys_and_redirects, sandboxed):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    # An alias with "!" is a shell command git runs: what it prints is what git passed on.
    printed = run_git(["-c", "alias.environment=!env", "environment"], repo, timeout=30)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.decode().splitlines()
    assert "GIT_CONFIG_KEY_0=core.hooksPath" in lines and "LC_ALL=C" in lines
    assert KEY not in printed.stdout.decode()
    assert not [line for line in lines if line.startswith(("GIT_DIR=", "GIT_INDEX_FILE="))]


def test_a_caller_cannot_loosen_the_safety_settings():
    env = git_environment([], {"GIT_CONFIG_NOSYSTEM": "0", "GIT_ALLOW_PROTOCOL": "ext"})
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_ALLOW_PROTOCOL"] == ""


def test_diff_add_and_status_run_no_driver_of_the_repository(tmp_path, sandboxed):
    witness = tmp_path / "witness"
    repo = hostile_repo(tmp_path / "repo", witness)
    (repo / "notes.md").write_text(NOTES + "more\n")
    (repo / "data.txt").write_text("changed\n")

    diff = run_git(["diff", "HEAD", "--", "notes.md"], repo, timeout=30)
    status = run_git(["status", "--porcelain"], repo, timeout=30)
    index = repo / ".git" / "scratch-index"  # where the command may write
    added = run_git(
        ["add", "--all"], repo, timeout=30, writes=repo, env={"GIT_INDEX_FILE": str(index)}
    )

    # No textconv and no external diff: git's own patch of the raw content.
    assert diff.returncode == 0 and b"+more" in diff.stdout
    assert status.stdout.decode().splitlines() == [" M data.txt", " M notes.md"]
    assert added.returncode == 0 and index.is_file()
    assert traces(witness, repo) == []


def test_a_driver_named_with_dots_and_an_equals_sign_is_neutralised_too(tmp_path, sandboxed):
    witness = tmp_path / "witness"
    repo = hostile_repo(tmp_path / "repo", witness)
    # "-c filter.a=b.c.clean=" would be read as the key "filter.a": only the environment
    # form of the override can name this driver.
    (repo / ".gitattributes").write_text("*.py filter=a=b.c\n")
    git(repo, "config", "filter.a=b.c.clean", f"{repo / '.githooks' / 'mark'} clean")
    (repo / "calc.py").write_text("x = 2\n")
    index = repo / ".git" / "scratch-index"  # where the command may write
    added = run_git(
        ["add", "calc.py"], repo, timeout=30, writes=repo, env={"GIT_INDEX_FILE": str(index)}
    )
    assert added.returncode == 0, added.stderr
    assert traces(witness, repo) == []


def test_a_promisor_remote_cannot_run_a_command_to_fetch_a_missing_object(tmp_path, sandboxed):
    witness = tmp_path / "witness"
    witness.mkdir()
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    # A partial clone fetches whatever object it lacks from its promisor remote, and an
    # ext:: URL is a shell command.
    for key, value in (
        ("core.repositoryFormatVersion", "1"),
        ("extensions.partialClone", "evil"),
        ("remote.evil.promisor", "true"),
        ("remote.evil.url", f"ext::sh -c touch% {witness}/fetched"),
        ("protocol.ext.allow", "always"),
    ):
        git(repo, "config", key, value)
    (repo / ".git" / "refs" / "heads" / "main").write_text("1" * 40 + "\n")

    found = run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], repo, timeout=30)

    assert found.returncode != 0
    assert not (witness / "fetched").exists()


def test_without_git_the_runner_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    with pytest.raises(GitMissing, match="git is not installed"):
        run_git(["status"], tmp_path, timeout=30)


@pytest.mark.sandbox
@pytest.mark.skipif(not SANDBOX.available, reason=f"no sandbox here: {SANDBOX.reason}")
def test_sandboxed_git_writes_only_where_the_caller_said(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    write = ["-c", "alias.scribble=!touch scribbled", "scribble"]

    refused = run_git(write, repo, timeout=30)
    allowed = run_git(write, repo, timeout=30, writes=repo)

    assert refused.returncode != 0 and b"Read-only file system" in refused.stderr
    assert allowed.returncode == 0 and (repo / "scribbled").is_file()


def test_the_sandbox_shows_a_linked_worktree_its_git_directories(tmp_path, sandboxed):
    # A linked worktree's .git is a file naming a directory elsewhere, under the private
    # /tmp of the sandbox when the repository is in /tmp: git must still find it.
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    branch = run_git(["rev-parse", "--abbrev-ref", "HEAD"], linked, timeout=30)
    assert branch.stdout == b"side\n"
