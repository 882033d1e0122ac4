"""The macOS sandbox (Seatbelt): its profile, its sandbox-exec command line, its probe.

All but the last test run anywhere: they read the profile and the argv, they do not
run sandbox-exec. The last one runs the real thing and only on macOS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from codewhale import sandbox
from codewhale.sandbox import (
    SandboxSpec,
    hidden_paths,
    sandbox_status,
    sandboxed,
    seatbelt,
)
from codewhale.sandbox.seatbelt import seatbelt_profile
from codewhale.sandbox.spec import Probe

HEAD = ["(version 1)", "(allow default)", "(deny file-write*)"]
WORKSPACE_WRITES = ['(allow file-write* (subpath (param "WORKSPACE")))']
SHELL_WRITES = [
    '(allow file-write* (subpath (param "SCRATCH")))',
    '(allow file-write* (literal "/dev/null"))',
    '(allow file-write* (literal "/dev/zero"))',
    '(allow file-write* (literal "/dev/tty"))',
    '(allow file-write* (literal "/dev/dtracehelper"))',
    '(allow file-write* (regex #"^/dev/fd/"))',
]
NO_NETWORK = ["(deny network-outbound)", "(deny network-inbound)", "(deny network-bind)"]
OTHER_PROCESSES = [
    "(deny process-info* (target others))",
    '(deny sysctl-read (sysctl-name-prefix "kern.procargs"))',
    "(deny signal)",
    "(allow signal (target same-sandbox))",
]
SANDBOX_EXEC = "/usr/bin/sandbox-exec"


def rules(profile: str) -> list[str]:
    """The profile's rules in order, without its comments and blank lines."""
    return [line for line in profile.splitlines() if line and not line.startswith(";")]


def spec(workspace: Path, *, writable: bool, network: bool, hidden=()) -> SandboxSpec:
    return SandboxSpec(workspace, workspace, writable=writable, network=network, hidden=hidden)


@pytest.mark.parametrize("writable", [True, False], ids=["writable", "read-only"])
@pytest.mark.parametrize("network", [True, False], ids=["network", "offline"])
def test_the_profile_holds_exactly_the_rules_the_spec_asks_for(tmp_path, writable, network):
    profile = seatbelt_profile(spec(tmp_path, writable=writable, network=network))
    expected = [
        *HEAD,
        *(WORKSPACE_WRITES if writable else []),
        *SHELL_WRITES,
        *([] if network else NO_NETWORK),
        *OTHER_PROCESSES,
    ]
    assert rules(profile) == expected


def test_each_line_is_one_whole_rule_or_a_comment(tmp_path):
    secret = tmp_path / ".ssh"
    secret.mkdir()
    profile = seatbelt_profile(spec(tmp_path, writable=True, network=False, hidden=(secret,)))
    for line in rules(profile):
        assert line.startswith("(") and line.endswith(")"), line
        assert line.count("(") == line.count(")"), line


def test_a_writable_workspace_keeps_its_repository_settings_read_only(tmp_path, on_macos):
    git_dir = tmp_path / ".git"
    confined = SandboxSpec(
        tmp_path,
        tmp_path,
        writable=True,
        network=True,
        pinned=(git_dir,),
        read_only=(git_dir / "config", git_dir / "hooks"),
    )
    profile, parameters, _ = split_argv(argv_of(["true"], confined))
    assert rules(profile)[: len(HEAD) + 4] == [
        *HEAD,
        *WORKSPACE_WRITES,
        # `literal`: .git itself cannot be renamed or removed, what is inside stays writable.
        '(deny file-write* (literal (param "PINNED_0")))',
        '(deny file-write* (subpath (param "READ_ONLY_0")))',
        '(deny file-write* (subpath (param "READ_ONLY_1")))',
    ]
    assert parameters["PINNED_0"] == str(git_dir)
    assert parameters["READ_ONLY_1"] == str(git_dir / "hooks")
    # A read-only workspace needs none of it.
    read_only = rules(seatbelt_profile(replace(confined, writable=False)))
    assert not [rule for rule in read_only if "PINNED" in rule or "READ_ONLY" in rule]


def test_hidden_paths_are_denied_last_so_they_win_over_the_workspace(tmp_path):
    secret_dir = tmp_path / ".ssh"
    secret_dir.mkdir()
    secret_file = tmp_path / ".env"
    secret_file.write_text("x")
    profile = seatbelt_profile(
        spec(tmp_path, writable=True, network=True, hidden=(secret_dir, secret_file))
    )
    found = rules(profile)
    assert found[-2:] == [
        '(deny file-read* file-write* (subpath (param "HIDDEN_0")))',
        '(deny file-read* file-write* (literal (param "HIDDEN_1")))',
    ]
    assert found[:-2] == [*HEAD, *WORKSPACE_WRITES, *SHELL_WRITES, *OTHER_PROCESSES]


@pytest.fixture
def on_macos(monkeypatch, tmp_path):
    """sandboxed() as on a Mac whose sandbox-exec works; scratch dirs go under tmp_path."""
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(sandbox, "_probe", lambda: Probe(SANDBOX_EXEC, "test"))
    scratch_root = tmp_path / "scratch-root"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    return scratch_root


def argv_of(command: list[str], confined: SandboxSpec) -> list[str]:
    """The command line sandboxed() gives `command`; on macOS it passes no descriptors."""
    with sandboxed(command, confined) as launch:
        assert launch.pass_fds == ()
        return launch.argv


def split_argv(argv: list[str]) -> tuple[str, dict[str, str], list[str]]:
    """sandbox-exec -p PROFILE (-D NAME=value)... REST -> (PROFILE, {NAME: value}, REST)."""
    assert argv[:2] == [SANDBOX_EXEC, "-p"]
    profile, rest = argv[2], argv[3:]
    parameters: dict[str, str] = {}
    while rest[0] == "-D":
        name, _, value = rest[1].partition("=")
        parameters[name] = value
        rest = rest[2:]
    return profile, parameters, rest


def test_paths_travel_as_parameters_never_in_the_profile(tmp_path, on_macos):
    # A path that would end a string and a rule if it were spliced into SBPL.
    workspace = tmp_path / 'ws "quoted") (allow file-write* (subpath "/'
    secret = workspace / 'secret")'
    secret.mkdir(parents=True)
    command = ["bash", "-c", "true"]
    argv = argv_of(command, spec(workspace, writable=False, network=False, hidden=(secret,)))

    profile, parameters, rest = split_argv(argv)
    scratch = Path(parameters["SCRATCH"])
    assert parameters == {
        "WORKSPACE": str(workspace),
        "SCRATCH": str(scratch),
        "HIDDEN_0": str(secret),
    }
    assert scratch.is_dir() and scratch.parent == on_macos
    assert scratch.name.startswith("codewhale-sandbox-")
    assert rest == ["/usr/bin/env", f"TMPDIR={scratch}", *command]
    assert str(tmp_path) not in profile
    assert [item for item in argv if str(workspace) in item] == [
        f"WORKSPACE={workspace}",
        f"HIDDEN_0={secret}",
    ]
    assert rules(profile) == [
        *HEAD,
        *SHELL_WRITES,
        *NO_NETWORK,
        *OTHER_PROCESSES,
        '(deny file-read* file-write* (subpath (param "HIDDEN_0")))',
    ]


def test_every_parameter_the_profile_names_is_passed(tmp_path, on_macos):
    secret = tmp_path / ".netrc"
    secret.write_text("")
    argv = argv_of(["true"], spec(tmp_path, writable=True, network=True, hidden=(secret,)))
    profile, parameters, _ = split_argv(argv)
    named = {
        line.split('(param "')[1].split('"')[0] for line in rules(profile) if "(param " in line
    }
    assert named == {"WORKSPACE", "SCRATCH", "HIDDEN_0"} == set(parameters)


def test_parameters_are_resolved_paths(tmp_path, on_macos):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    _, parameters, _ = split_argv(argv_of(["true"], spec(link, writable=True, network=True)))
    assert parameters["WORKSPACE"] == str(real)


def test_each_command_gets_its_own_scratch_dir(tmp_path, on_macos):
    first = split_argv(argv_of(["true"], spec(tmp_path, writable=False, network=False)))
    second = split_argv(argv_of(["true"], spec(tmp_path, writable=False, network=False)))
    assert first[1]["SCRATCH"] != second[1]["SCRATCH"]


def test_on_macos_paths_under_tmp_are_hidden_too(tmp_path, monkeypatch):
    # Linux needs no rule for them (bwrap's /tmp is private); macOS's /tmp is the host's.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"HOME": str(tmp_path / "home")}
    assert elsewhere not in hidden_paths(workspace, [str(elsewhere)], env)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert elsewhere in hidden_paths(workspace, [str(elsewhere)], env)


def probe_as(monkeypatch, platform: str, sandbox_exec: str = SANDBOX_EXEC) -> Probe:
    """A fresh, uncached probe as `platform` would run it."""
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(seatbelt, "SANDBOX_EXEC", sandbox_exec)
    return sandbox._probe.__wrapped__()


def test_other_platforms_are_told_what_the_sandbox_needs(monkeypatch):
    probe = probe_as(monkeypatch, "sunos5")
    assert probe.launcher is None
    assert "Linux (bubblewrap) or macOS (sandbox-exec)" in probe.reason and "sunos5" in probe.reason


def test_a_mac_without_sandbox_exec_says_so(monkeypatch, tmp_path):
    probe = probe_as(monkeypatch, "darwin", str(tmp_path / "no-sandbox-exec"))
    assert probe == Probe(None, f"{tmp_path / 'no-sandbox-exec'} not found")


def fake_sandbox_exec(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "sandbox-exec"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_the_probe_runs_bash_under_the_real_profile(monkeypatch, tmp_path):
    seen = tmp_path / "argv"
    script = fake_sandbox_exec(tmp_path, f'printf "%s\\0" "$@" > "{seen}"')
    probe = probe_as(monkeypatch, "darwin", str(script))
    assert probe == Probe(str(script), f"sandbox-exec ({script})")
    argv = seen.read_text().split("\0")[:-1]
    assert argv[0] == "-p" and argv[-3:] == ["/bin/bash", "-c", "true"]
    assert rules(argv[1]) == [*HEAD, *SHELL_WRITES, *NO_NETWORK, *OTHER_PROCESSES]


def test_a_failing_probe_reports_the_last_line_of_stderr(monkeypatch, tmp_path):
    script = fake_sandbox_exec(
        tmp_path, 'echo "noise" >&2; echo "sandbox-exec: unbound variable" >&2; exit 65'
    )
    probe = probe_as(monkeypatch, "darwin", str(script))
    assert probe == Probe(None, "sandbox-exec cannot start here: sandbox-exec: unbound variable")


@pytest.mark.sandbox
@pytest.mark.skipif(sys.platform != "darwin", reason="runs the real sandbox-exec (macOS only)")
@pytest.mark.parametrize("writable", [False, True], ids=["read-only", "writable"])
def test_seatbelt_lets_a_command_write_only_when_the_spec_allows(tmp_path, writable):
    status = sandbox_status()
    assert status.available, status.reason
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = argv_of(["/usr/bin/touch", "made"], spec(workspace, writable=writable, network=False))
    done = subprocess.run(
        argv,
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env={"PATH": os.defpath},
        timeout=20,
        check=False,
    )
    assert (done.returncode == 0) is writable, done.stderr
    assert (workspace / "made").exists() is writable
