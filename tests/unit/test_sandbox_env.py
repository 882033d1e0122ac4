"""What a shell command starts with: its environment, its bwrap arguments, its fallback.

None of these need bwrap to work; tests/integration/test_sandbox.py runs the real thing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhale.authority import READ_ONLY, Authority
from codewhale.config import ConfigError, load_config
from codewhale.config_models import SandboxConfig
from codewhale.permissions import CommandClass, Mode
from codewhale.sandbox import (
    NON_INTERACTIVE_ENV,
    SandboxSpec,
    SandboxStatus,
    child_environment,
    hidden_paths,
    sandbox_status,
)
from codewhale.sandbox.bwrap import bwrap_arguments
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.shell import ExecShell, sandbox_spec

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-1",
    "OPENAI_KEY": "openai-2",
    "DEEPSEEK_API_KEY": "sk-deepseek-3",
    "CODEWHALE_API_KEY": "sk-codewhale-4",
    "GITHUB_TOKEN": "ghp-5",
    "SSH_AUTH_SOCK": "/run/user/1000/ssh-agent",
}


def test_secrets_are_not_passed_and_the_allowlist_is():
    parent = {**SECRETS, "PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C", "TZ": "UTC"}
    env = child_environment(parent)
    assert not set(SECRETS) & set(env)
    assert env["PATH"] == "/usr/bin" and env["HOME"] == "/home/u"
    assert env["LC_ALL"] == "C" and env["TZ"] == "UTC"


def test_editors_pagers_and_prompts_are_switched_off_whatever_the_parent_says():
    parent = {"PAGER": "less", "GIT_EDITOR": "vim", "EDITOR": "nano"}
    env = child_environment(parent, pass_env=["PAGER"])
    assert {name: env[name] for name in NON_INTERACTIVE_ENV} == NON_INTERACTIVE_ENV
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["PAGER"] == "cat"


def test_pass_env_adds_named_variables_only():
    env = child_environment({"GOCACHE": "/var/go", "GOPATH": "/go"}, pass_env=["GOCACHE"])
    assert env["GOCACHE"] == "/var/go" and "GOPATH" not in env


def spec(workspace: Path, *, writable: bool, network: bool, hidden=()) -> SandboxSpec:
    return SandboxSpec(workspace, workspace, writable=writable, network=network, hidden=hidden)


def test_read_only_arguments(tmp_path):
    arguments = bwrap_arguments("bwrap", spec(tmp_path, writable=False, network=False))
    ws = str(tmp_path)
    assert arguments[:10] == [
        "bwrap",
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
    ]
    assert arguments[10:13] == ["--ro-bind", ws, ws]
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session"):
        assert flag in arguments
    assert arguments[arguments.index("--cap-drop") + 1] == "ALL"
    assert arguments[-5:] == ["--setenv", "TMPDIR", "/tmp", "--chdir", ws]


def test_writable_arguments_keep_the_network(tmp_path):
    arguments = bwrap_arguments("bwrap", spec(tmp_path, writable=True, network=True))
    assert arguments[10:13] == ["--bind", str(tmp_path), str(tmp_path)]
    assert "--unshare-net" not in arguments


def test_hidden_paths_are_mounted_over_after_the_workspace(tmp_path):
    secret_dir = tmp_path / ".ssh"
    secret_dir.mkdir()
    secret_file = tmp_path / ".env"
    secret_file.write_text("x")
    arguments = bwrap_arguments(
        "bwrap", spec(tmp_path, writable=True, network=False, hidden=(secret_dir, secret_file))
    )
    assert arguments[13:18] == [
        *("--tmpfs", str(secret_dir)),
        *("--ro-bind", "/dev/null", str(secret_file)),
    ]


def test_hidden_paths_exist_are_resolved_and_never_hold_the_workspace(tmp_path, monkeypatch):
    # Paths under /tmp outside the workspace are hidden by the private /tmp already, so
    # this home lives inside the workspace.
    workspace = tmp_path / "ws"
    home = workspace / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("")
    (workspace / "secrets").mkdir()
    (workspace / "link").symlink_to(workspace / "secrets")
    env = {"HOME": str(home), "CODEWHALE_HOME": str(tmp_path / "app")}
    extra = [".env", "link", str(tmp_path), str(tmp_path / "elsewhere")]
    (tmp_path / "elsewhere").mkdir()
    hidden = hidden_paths(workspace, extra, env)
    assert home / ".ssh" in hidden and home / ".netrc" in hidden
    assert workspace / "secrets" in hidden  # through the link, resolved
    assert workspace / ".env" not in hidden  # does not exist
    assert tmp_path not in hidden  # holds the workspace
    assert tmp_path / "elsewhere" not in hidden  # under /tmp: the private /tmp hides it
    assert home / ".aws" not in hidden


def test_the_apps_own_dirs_are_hidden(tmp_path):
    workspace = tmp_path / "ws"
    app_home = workspace / "app-home"
    for name in ("config", "data", "state", "cache"):
        (app_home / name).mkdir(parents=True)
    hidden = hidden_paths(workspace, [], {"HOME": str(tmp_path), "CODEWHALE_HOME": str(app_home)})
    assert {app_home / "config", app_home / "data", app_home / "state"} <= set(hidden)
    assert app_home / "cache" not in hidden


def context(tmp_path: Path, authority: Authority | None = None, mode=Mode.AGENT) -> ToolContext:
    extra = {} if authority is None else {"authority": authority}
    made = ToolContext(workspace=tmp_path, session_id="s1", **extra)
    made.modes.current = mode
    return made


@pytest.mark.parametrize(
    ("authority", "mode", "writable", "network"),
    [
        (None, Mode.AGENT, True, True),
        (None, Mode.YOLO, True, True),
        (None, Mode.PLAN, False, False),
        (READ_ONLY, Mode.YOLO, False, False),
        (Authority(writes=False, shell=CommandClass.TEST), Mode.AGENT, False, False),
        (Authority(writes=False, shell=CommandClass.OTHER), Mode.AGENT, False, True),
    ],
    ids=["full", "full-yolo", "plan-mode", "read-only", "test-only", "no-writes-any-shell"],
)
def test_authority_and_mode_shape_the_sandbox(tmp_path, authority, mode, writable, network):
    made = sandbox_spec(context(tmp_path, authority, mode), tmp_path, [])
    assert (made.writable, made.network) == (writable, network)


def test_switched_off_status_says_so():
    status = sandbox_status(False)
    assert not status.available and "enabled = false" in status.reason


@pytest.fixture
def no_sandbox(monkeypatch):
    status = SandboxStatus(False, "bwrap missing in this test")
    monkeypatch.setattr("codewhale.tools.shell.sandbox_status", lambda enabled: status)


async def test_auto_falls_back_to_running_unsandboxed(tmp_path, no_sandbox, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-fallback-canary")
    result = await ExecShell().run({"command": "touch made && env"}, context(tmp_path))
    assert result.ok and (tmp_path / "made").exists()
    assert "sk-fallback-canary" not in result.output and "GIT_EDITOR=true" in result.output


async def test_a_required_sandbox_that_cannot_start_refuses_the_command(tmp_path, no_sandbox):
    tool = ExecShell(SandboxConfig(enabled=True))
    with pytest.raises(ToolError, match="bwrap missing in this test"):
        await tool.run({"command": "touch made"}, context(tmp_path))
    assert not (tmp_path / "made").exists()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "value"), [("true", True), ("false", False), ('"auto"', "auto")])
def test_sandbox_config_section(tmp_path, text, value):
    home = tmp_path / "home"
    write(
        home / "config" / "config.toml",
        f'[sandbox]\nenabled = {text}\nhide = ["~/.kube"]\npass_env = ["GOCACHE"]\n',
    )
    sandbox = load_config(env={"CODEWHALE_HOME": str(home)}).config.sandbox
    assert sandbox == SandboxConfig(enabled=value, hide=["~/.kube"], pass_env=["GOCACHE"])


def test_a_bad_switch_names_the_choices(tmp_path):
    home = tmp_path / "home"
    write(home / "config" / "config.toml", '[sandbox]\nenabled = "yes"\n')
    with pytest.raises(ConfigError, match=r'sandbox.enabled: expected true, false or "auto"'):
        load_config(env={"CODEWHALE_HOME": str(home)})


def test_a_project_cannot_loosen_the_sandbox(tmp_path):
    home = tmp_path / "home"
    write(home / "config" / "config.toml", '[sandbox]\nhide = ["~/.kube"]\n')
    workspace = tmp_path / "repo"
    write(
        workspace / ".codewhale" / "config.toml",
        '[sandbox]\nenabled = false\nhide = []\npass_env = ["AWS_SECRET_ACCESS_KEY"]\n',
    )
    loaded = load_config(workspace=workspace, env={"CODEWHALE_HOME": str(home)})
    assert loaded.config.sandbox == SandboxConfig(hide=["~/.kube"])
    for key in ("sandbox.enabled", "sandbox.hide", "sandbox.pass_env"):
        assert any(f"'{key}' is ignored in a project config" in w for w in loaded.warnings)
