"""The parts of the sandbox's wall that need no bwrap: which git paths are protected,
the bwrap arguments that protect them and carry the socket filter, the filter itself,
and the file tools' refusal of a hard link to a credential store.

tests/integration/test_sandbox_wall.py runs all of it in the real sandbox.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from codewhale.sandbox import SandboxSpec, git_settings
from codewhale.sandbox.bwrap import bwrap_arguments
from codewhale.sandbox.seccomp import program_fd, unix_socket_filter
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.files import ReadFile


def git(directory: Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=directory, check=True, capture_output=True)


def test_a_repository_is_pinned_and_its_settings_listed_missing_dirs_made(tmp_path):
    git(tmp_path, "init", "-q")
    git_dir = tmp_path / ".git"
    for name in ("hooks", "info"):
        for path in (git_dir / name).iterdir():
            path.unlink()
        (git_dir / name).rmdir()
    settings = git_settings(tmp_path)
    assert settings.pinned == (git_dir,)
    assert settings.read_only == (git_dir / "hooks", git_dir / "info", git_dir / "config")
    assert (git_dir / "hooks").is_dir() and (git_dir / "info").is_dir()


def test_no_repository_nothing_to_protect(tmp_path):
    settings = git_settings(tmp_path)
    assert settings.pinned == () and settings.read_only == ()
    assert not (tmp_path / ".git").exists()


def test_a_worktree_outside_its_git_dir_pins_only_its_git_file(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q")
    git(
        main,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "c",
    )
    tree = tmp_path / "tree"
    git(main, "worktree", "add", "-q", "--detach", str(tree))
    settings = git_settings(tree)
    # The worktree's git directory is the main repository's, outside this workspace.
    assert settings.pinned == () and settings.read_only == (tree / ".git",)


def test_a_git_file_naming_a_directory_inside_the_workspace_protects_it(tmp_path):
    git(tmp_path, "init", "-q", "--separate-git-dir", str(tmp_path / "store"))
    settings = git_settings(tmp_path)
    store = tmp_path / "store"
    assert settings.pinned == (store,)
    assert settings.read_only == (
        tmp_path / ".git",
        store / "hooks",
        store / "info",
        store / "config",
    )


def test_the_bwrap_line_pins_then_protects_then_hides(tmp_path):
    git_dir = tmp_path / ".git"
    spec = SandboxSpec(
        tmp_path,
        tmp_path,
        writable=True,
        network=True,
        hidden=(tmp_path / ".env",),
        pinned=(git_dir,),
        read_only=(git_dir / "config",),
    )
    (tmp_path / ".env").write_text("")
    arguments = bwrap_arguments("bwrap", spec)
    ws, config = str(tmp_path), str(git_dir / "config")
    assert arguments[10:22] == [
        *("--bind", ws, ws),
        *("--bind", str(git_dir), str(git_dir)),
        *("--ro-bind", config, config),
        *("--ro-bind", "/dev/null", str(tmp_path / ".env")),
    ]
    # A read-only workspace needs none of it, and a command with network no filter.
    read_only = bwrap_arguments("bwrap", SandboxSpec(tmp_path, tmp_path, False, True))
    assert str(git_dir) not in read_only and "--seccomp" not in read_only


def test_an_offline_command_gets_the_filter_descriptor(tmp_path):
    arguments = bwrap_arguments("bwrap", SandboxSpec(tmp_path, tmp_path, False, False), 7)
    at = arguments.index("--seccomp")
    assert arguments[at - 1 : at + 2] == ["--unshare-net", "--seccomp", "7"]


def test_the_filter_is_built_once_and_each_command_reads_its_own_copy():
    built = unix_socket_filter()
    if built.program is None:
        pytest.skip(f"no filter on this machine: {built.reason}")
    assert unix_socket_filter() is built
    # A BPF program is a whole number of 8-byte instructions.
    assert len(built.program) % 8 == 0
    with program_fd(built.program) as first, program_fd(built.program) as second:
        assert os.read(first, 65536) == os.read(second, 65536) == built.program
    with pytest.raises(OSError):
        os.fstat(first)  # closed once the command has started


async def test_the_file_tools_refuse_a_hard_link_to_a_credential_store(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    npmrc = home / ".npmrc"
    npmrc.write_text("//registry.npmjs.org/:_authToken=npm-canary\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.link(npmrc, workspace / "npmrc")
    context = ToolContext(workspace=workspace, session_id="s1")
    with pytest.raises(ToolError, match="npmrc has 2 hard links") as refused:
        await ReadFile().run({"path": "npmrc"}, context)
    assert "npm-canary" not in str(refused.value)
