"""The sandbox's wall against side doors, tried as an attacker would, with real bwrap.

An offline command cannot reach a host process through a Unix socket (a real
listening socket is the target, a command with network the control); the credential
stores users keep in their home are hidden; a writable workspace keeps its
repository's settings read-only while `git commit` still works inside.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from codewhale.authority import READ_ONLY, Authority
from codewhale.config_models import RlmConfig, SandboxConfig
from codewhale.handles import HandleStore
from codewhale.permissions import CommandClass, Mode
from codewhale.providers.client import ChatClient
from codewhale.rlm.kernel import KernelLimits
from codewhale.rlm.sessions import RlmManager
from codewhale.sandbox import SandboxSpec, child_environment, sandbox_status, sandboxed
from codewhale.tools.base import ToolContext, ToolResult
from codewhale.tools.shell import ExecShell
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import loopback_settings
from tests.support.subagents import REPORT, for_task, last_tool_results, wait_done

_STATUS = sandbox_status()
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not _STATUS.available, reason=f"bubblewrap cannot start here: {_STATUS.reason}"
    ),
]
TEST_ONLY = Authority(
    writes=False, plan_artifacts=False, shell=CommandClass.TEST, label="a verifier"
)
# The base interpreter: a venv under /tmp would be invisible behind the private /tmp.
PYTHON = os.path.join(sys.base_prefix, "bin", "python3")
# Connects to every socket named in targets.txt and sends "leak"; says what happened.
CLIENT = """
import socket
for path in open("targets.txt").read().split():
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            client.sendall(b"leak")
        print("sent", path)
    except OSError as error:
        print("refused", path, error)
"""


@pytest.fixture
def workspace() -> Iterator[Path]:
    # Short: a Unix socket's path holds at most 107 bytes.
    with tempfile.TemporaryDirectory(prefix="cw-ws-") as name:
        yield Path(name)


def context_for(workspace: Path, authority: Authority | None = None) -> ToolContext:
    if authority is None:
        return ToolContext(workspace=workspace, session_id="s1")
    return ToolContext(workspace=workspace, session_id="s1", authority=authority)


async def run(context: ToolContext, command: str) -> ToolResult:
    return await ExecShell().run({"command": command, "timeout_secs": 30}, context)


def run_sandboxed(spec: SandboxSpec, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`argv` run under sandboxed() as the shell tool runs it, with its descriptors."""
    with sandboxed(argv, spec) as launch:
        return subprocess.run(
            launch.argv,
            pass_fds=launch.pass_fds,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=child_environment(os.environ),
            timeout=60,
            check=False,
        )


class Listener:
    """A host process's listening Unix socket: what an offline command must not reach."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(8)
        # The commands have ended when we look: their connections are queued already.
        self.server.setblocking(False)

    def received(self) -> list[bytes]:
        """What each connection made so far sent."""
        messages = []
        while True:
            try:
                connection, _ = self.server.accept()
            except BlockingIOError:
                return messages
            with connection:
                connection.settimeout(10)
                messages.append(b"".join(iter(lambda c=connection: c.recv(4096), b"")))

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)


def aim_client(workspace: Path, *sockets: Path) -> None:
    (workspace / "client.py").write_text(CLIENT)
    (workspace / "targets.txt").write_text("\n".join(map(str, sockets)))


# -- Unix sockets --------------------------------------------------------------------


@pytest.mark.parametrize(
    "authority", [READ_ONLY, TEST_ONLY, None], ids=["read-only", "test-only", "any-command-control"]
)
async def test_an_offline_command_cannot_reach_a_socket_in_the_workspace(workspace, authority):
    host = Listener(workspace / "host.sock")
    aim_client(workspace, host.path)
    try:
        result = await run(context_for(workspace, authority), f"{PYTHON} client.py")
        if authority is None:  # may run anything, so it has the network
            assert f"sent {host.path}" in result.output
            assert host.received() == [b"leak"]
        else:
            assert f"refused {host.path} [Errno 13] Permission denied" in result.output
            assert host.received() == []
    finally:
        host.close()


@pytest.mark.parametrize("network", [False, True], ids=["offline", "network-control"])
def test_an_offline_command_cannot_reach_a_socket_in_a_visible_host_dir(workspace, network):
    """A directory like /run: on the host, outside the workspace, visible read-only."""
    with tempfile.TemporaryDirectory(prefix="cw-run-") as name:
        run_dir = Path(name)
        host = Listener(run_dir / "daemon.sock")
        aim_client(workspace, host.path)
        spec = SandboxSpec(
            workspace, workspace, writable=False, network=network, visible=(run_dir,)
        )
        try:
            done = run_sandboxed(spec, [PYTHON, "client.py"])
            assert done.stdout.startswith("sent" if network else "refused"), done
            assert host.received() == ([b"leak"] if network else [])
        finally:
            host.close()


async def test_socketpairs_pipes_and_asyncio_still_work_offline(workspace):
    code = (
        "import asyncio, socket\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'pair')\n"
        "print(b.recv(4).decode(), asyncio.run(asyncio.sleep(0, 'loop')))"
    )
    command = f"{PYTHON} -c {shlex.quote(code)} | cat"
    result = await run(context_for(workspace, READ_ONLY), command)
    assert result.ok and result.output.splitlines()[-1] == "pair loop"


# socketcall(SYS_SOCKET, {AF_UNIX, SOCK_STREAM, 0}), then the direct socket(AF_UNIX, ...)
# of i386 kernels since 4.3; the exit code has bit 0 set if the first failed with EACCES,
# bit 1 if the second did.
I386_SOCKETS = """
.data
args: .long 1, 1, 0
.text
.globl _start
_start:
    xorl %edi, %edi
    movl $102, %eax
    movl $1, %ebx
    movl $args, %ecx
    int $0x80
    cmpl $-13, %eax
    jne 1f
    orl $1, %edi
1:  movl $359, %eax
    movl $1, %ebx
    movl $1, %ecx
    xorl %edx, %edx
    int $0x80
    cmpl $-13, %eax
    jne 2f
    orl $2, %edi
2:  movl %edi, %ebx
    movl $1, %eax
    int $0x80
"""


def i386_program(directory: Path) -> Path:
    """I386_SOCKETS built into `directory`, or skip where it cannot be built or run."""
    if platform.machine() != "x86_64" or not (shutil.which("as") and shutil.which("ld")):
        pytest.skip("needs an x86_64 machine with binutils (as, ld)")
    source, program = directory / "sockets32.s", directory / "sockets32"
    source.write_text(I386_SOCKETS)
    subprocess.run(["as", "--32", "-o", f"{program}.o", str(source)], check=True)
    subprocess.run(["ld", "-m", "elf_i386", "-o", str(program), f"{program}.o"], check=True)
    try:
        unconfined = subprocess.run([str(program)], check=False).returncode
    except OSError as error:  # a kernel without 32-bit support
        pytest.skip(f"this kernel cannot run i386 programs: {error}")
    assert unconfined == 0, "both system calls make a socket outside the sandbox"
    return program


@pytest.mark.parametrize("network", [False, True], ids=["offline", "network-control"])
def test_a_32_bit_program_cannot_go_around_the_filter(workspace, network):
    program = i386_program(workspace)
    spec = SandboxSpec(workspace, workspace, writable=False, network=network)
    assert run_sandboxed(spec, [str(program)]).returncode == (0 if network else 0b11)


def test_without_libseccomp_offline_commands_see_no_run_and_the_status_says_so(workspace):
    script = """
import sys
sys.modules["pyseccomp"] = None  # as on a system without libseccomp: the import fails
import asyncio, json
from pathlib import Path
from codewhale.authority import READ_ONLY
from codewhale.sandbox import sandbox_status
from codewhale.tools.base import ToolContext
from codewhale.tools.shell import ExecShell
context = ToolContext(workspace=Path(sys.argv[1]), session_id="s1", authority=READ_ONLY)
command = "find /run/ /var/run/ -mindepth 1 | wc -l"
result = asyncio.run(ExecShell().run({"command": command}, context))
print(json.dumps([sandbox_status().reason, result.output]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(workspace)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    reason, output = json.loads(done.stdout)
    assert "no seccomp filter (libseccomp unavailable" in reason
    assert reason.endswith("offline commands see no /run but can reach Unix sockets elsewhere")
    assert output.splitlines()[-1] == "0"


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "unconfined-control"])
async def test_rlm_code_cannot_reach_a_socket_in_the_workspace(llm, workspace, sandbox):
    client = ChatClient(loopback_settings(llm.base_url), retry_base_delay_secs=0.01)
    manager = RlmManager(
        client=client,
        config=RlmConfig(),
        handles=HandleStore(),
        limits=KernelLimits(eval_timeout_secs=20, memory_mb=512),
        workspace=workspace,
        sandbox=SandboxConfig(enabled=sandbox),
    )
    host = Listener(workspace / "host.sock")
    aim_client(workspace, host.path)
    try:
        await manager.open("doc", "some context", {"source": "test"})
        reply = await manager.evaluate("doc", "exec(open('client.py').read())")
        verdict = "refused" if sandbox else "sent"
        assert reply["ok"] and reply["stdout"].startswith(f"{verdict} {host.path}"), reply
        assert host.received() == ([] if sandbox else [b"leak"])
    finally:
        host.close()
        await manager.close_all()
        await client.aclose()


# -- the same from real children, through the classifier and the dispatcher ----------

# What each role runs to start the client: a verifier its tests, explore a `git grep`
# whose pager the classifier takes for part of a read-only command.
CHILD_COMMANDS = {
    "verifier": "make test",
    "explore": f"git grep --open-files-in-pager='{PYTHON} client.py' a",
    "general": "make test",  # the control: a child that may run anything has the network
}


@pytest.mark.parametrize("role", CHILD_COMMANDS)
async def test_offline_children_cannot_reach_sockets_in_the_workspace_or_under_run(
    llm, make_session, role
):
    session = make_session(mode=Mode.YOLO)
    workspace = session.workspace
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "notes.txt").write_text("a line to grep for\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=workspace, check=True)
    (workspace / "Makefile").write_text(f"test:\n\t{PYTHON} client.py\n")
    listeners = [Listener(workspace / "host.sock")]
    if os.access("/run", os.W_OK):
        listeners.append(Listener(Path(f"/run/cw-{uuid.uuid4().hex[:12]}.sock")))
    aim_client(workspace, *(listener.path for listener in listeners))
    try:
        call = ToolCallSpec("exec_shell", {"command": CHILD_COMMANDS[role]})
        llm.route(for_task(f"connect as {role}"), Reply(tool_calls=[call]), Reply(text=REPORT))
        child = session.manager.open({"prompt": f"connect as {role}", "type": role})
        assert (await wait_done(session, child["agent_id"]))["status"] == "completed"
        await session.close()
        [output] = last_tool_results(llm, f"connect as {role}")
        assert output.startswith("[exit code"), output  # the classifier let it run
        network = role == "general"
        for listener in listeners:
            verdict = "sent" if network else "refused"
            assert f"{verdict} {listener.path}" in output
            assert listener.received() == ([b"leak"] if network else [])
    finally:
        for listener in listeners:
            listener.close()


# -- credential stores -----------------------------------------------------------------

# The credential stores a command must not read, spelled out here rather than read
# from SECRET_HOME_PATHS, so that dropping one there fails this test.
CREDENTIAL_DIRS = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".git-credential-cache",
    ".cache/git/credential",
    ".config/gh",
    ".claude",
]
CREDENTIAL_FILES = [
    ".netrc",
    ".docker/config.json",
    ".config/containers/auth.json",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".gem/credentials",
    ".claude.json",
]


def fake_home(root: Path) -> Path:
    """A home holding every credential store, each with a canary naming it."""
    home = root / "home"
    for name in CREDENTIAL_DIRS:
        (home / name).mkdir(parents=True)
        (home / name / "secret").write_text(f"canary in {name}\n")
    for name in CREDENTIAL_FILES:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"canary in {name}\n")
    (home / ".claude" / "agents").mkdir()
    (home / ".claude" / "agents" / "helper.md").write_text("canary in .claude/agents\n")
    (home / ".claude" / ".credentials.json").write_text('{"canary": ".claude/.credentials"}')
    (home / ".docker" / "daemon.json").write_text("docker settings stay visible\n")
    return home


async def test_every_credential_store_in_home_is_hidden_from_commands(workspace, monkeypatch):
    # The home inside the workspace: paths under /tmp outside it are hidden anyway.
    home = fake_home(workspace)
    elsewhere = workspace / "claude-elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".credentials.json").write_text('{"canary": "CLAUDE_CONFIG_DIR"}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(elsewhere))
    command = (
        "grep -rh . ~ claude-elsewhere 2>/dev/null; "
        + "; ".join(
            f"cat ~/{name} >/dev/null 2>&1 && echo readable {name}" for name in CREDENTIAL_FILES
        )
        + "; true"
    )
    result = await run(context_for(workspace), command)
    assert "canary" not in result.output and "readable" not in result.output
    assert "docker settings stay visible" in result.output  # grep read what it could
    assert (home / ".npmrc").read_text() == "canary in .npmrc\n"


async def test_a_command_cannot_hard_link_a_hidden_file(workspace, monkeypatch):
    home = fake_home(workspace)
    monkeypatch.setenv("HOME", str(home))
    result = await run(context_for(workspace), "ln ~/.npmrc alias && cat alias")
    assert not result.ok and "canary" not in result.output
    assert not (workspace / "alias").exists()
    assert (home / ".npmrc").stat().st_nlink == 1


# -- the repository's settings ------------------------------------------------------


def git(directory: Path, *arguments: str) -> str:
    done = subprocess.run(
        ["git", *arguments], cwd=directory, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(workspace) -> Path:
    git(workspace, "init", "-q")
    git(workspace, "config", "user.name", "Sandbox Test")
    git(workspace, "config", "user.email", "sandbox@example.invalid")
    (workspace / "f.txt").write_text("one\n")
    git(workspace, "add", "f.txt")
    git(workspace, "commit", "-qm", "one")
    return workspace


SETTINGS_ATTACKS = [
    "echo '[core] hooksPath = .' >> .git/config",
    "git config core.fsmonitor 'touch pwned'",
    "touch .git/hooks/post-commit",
    "rm -r .git/hooks",
    "echo '*.md diff=evil' > .git/info/attributes",
    "echo notes.txt >> .git/info/exclude",
    # Renamed, .git would take its read-only parts along and leave room for a new one.
    "mv .git .git-old",
]


def settings_of(repo: Path) -> dict[str, str]:
    """The repository's settings as files and their contents, read on the host."""
    git_dir = repo / ".git"
    paths = [git_dir / "config", *sorted((git_dir / "hooks").rglob("*"))]
    paths += sorted((git_dir / "info").rglob("*"))
    return {str(path.relative_to(repo)): path.read_text() for path in paths if path.is_file()}


async def test_a_writable_command_commits_but_cannot_change_the_repository_settings(repo):
    before = settings_of(repo)
    committed = await run(context_for(repo), "echo two > f.txt && git commit -qam two")
    assert committed.ok, committed.output
    assert git(repo, "log", "--format=%s") == "two\none"
    for attack in SETTINGS_ATTACKS:
        result = await run(context_for(repo), attack)
        assert not result.ok, attack
    assert settings_of(repo) == before
    assert (repo / ".git").is_dir() and not (repo / ".git-old").exists()
    assert not (repo / "pwned").exists()


async def test_missing_hooks_and_info_dirs_are_made_and_kept_read_only(repo):
    shutil.rmtree(repo / ".git" / "hooks")
    shutil.rmtree(repo / ".git" / "info")
    command = (
        "mkdir -p .git/hooks .git/info; "
        "echo evil > .git/hooks/post-commit; echo evil > .git/info/exclude"
    )
    result = await run(context_for(repo), command)
    assert "Read-only file system" in result.output
    assert list((repo / ".git" / "hooks").iterdir()) == []
    assert list((repo / ".git" / "info").iterdir()) == []


async def test_a_read_only_command_changes_nothing_in_the_repository(repo):
    shutil.rmtree(repo / ".git" / "hooks")
    result = await run(context_for(repo, READ_ONLY), "git status --short")
    assert result.ok
    assert not (repo / ".git" / "hooks").exists()  # no hooks dir made: all is read-only


async def test_a_worktree_keeps_its_git_file_and_the_main_settings(repo):
    # Where the app puts an isolated child: inside the main repository's git directory.
    tree = repo / ".git" / "codewhale-worktrees" / "child"
    git(repo, "worktree", "add", "-q", "--detach", str(tree))
    dot_git = (tree / ".git").read_text()
    main_config = (repo / ".git" / "config").read_text()
    for attack in (
        "echo 'gitdir: /elsewhere' > .git",
        "mv .git .git-old",
        "echo '[core] hooksPath = .' >> \"$(git rev-parse --git-common-dir)/config\"",
        'touch "$(git rev-parse --git-common-dir)/hooks/post-checkout"',
    ):
        result = await run(context_for(tree), attack)
        assert not result.ok, attack
    assert (tree / ".git").read_text() == dot_git
    assert (repo / ".git" / "config").read_text() == main_config
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()


async def test_a_submodule_keeps_its_settings_read_only(repo, tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q")
    git(
        library,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "l",
    )
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    module = repo / ".git" / "modules" / "lib"
    config = (module / "config").read_text()
    for attack in (
        "echo '[core] fsmonitor = touch pwned' >> .git/modules/lib/config",
        "touch .git/modules/lib/hooks/post-checkout",
        "mv .git/modules/lib .git/modules/lib-old",
    ):
        result = await run(context_for(repo), attack)
        assert not result.ok, attack
    assert (module / "config").read_text() == config
    assert not (module / "hooks" / "post-checkout").exists()
