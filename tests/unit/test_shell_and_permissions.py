"""exec_shell processes, the permission rules, handles, fetch_url and sanitizing."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest

from codewhale.config_models import SandboxConfig
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.handles import HandleError, HandleStore
from codewhale.permissions import (
    ApprovalClass,
    CommandClass,
    Mode,
    PathEscapeError,
    Verdict,
    classify_command,
    confine,
    decide,
    relative_to_workspace,
)
from codewhale.providers.types import ToolCall
from codewhale.sanitize import clean_text
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.files import ReadFile
from codewhale.tools.registry import ToolRegistry
from codewhale.tools.shell import ExecShell
from codewhale.tools.web import FetchUrl, html_to_text


@pytest.fixture
def context(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(workspace=root, session_id="s1")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] != "Z"  # zombies are dead


async def test_timeout_kills_the_whole_process_group(context):
    # Unsandboxed, so `$!` is a host pid (tests/integration/test_sandbox.py covers the
    # sandboxed case, where the whole PID namespace goes).
    pid_file = context.workspace / "child.pid"
    command = f"sleep 300 & echo $! > {pid_file}; sleep 300"
    shell = ExecShell(SandboxConfig(enabled=False))
    result = await shell.run({"command": command, "timeout_secs": 1}, context)
    assert result.output.startswith("[timed out after 1s; process group killed]")
    assert not result.ok
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 60  # a ceiling for a survivor, not a measure
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the backgrounded grandchild survived"


async def test_exit_code_and_merged_output(context):
    result = await ExecShell().run({"command": "echo out; echo err >&2; exit 3"}, context)
    assert result.output.startswith("[exit code 3;")
    assert "out" in result.output and "err" in result.output
    assert not result.ok


async def test_api_keys_are_not_passed_to_commands(context, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-should-not-leak-1234")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-nor-this-one-5678")
    result = await ExecShell().run({"command": "env"}, context)
    assert "sk-should-not-leak" not in result.output and "sk-nor-this" not in result.output
    assert "PATH=" in result.output


CANARY = "sk-canary-7f3e21"
ENVIRON_READS = [
    "tail -n1 /proc/$PPID/environ",
    "cat /proc/$$/environ",
    "cat /proc/self/environ",
    "cat /proc/[0-9]*/environ",
    "cat /proc/*/environ",
    "strings /proc/1/env*",
    "cd /proc && cat self/environ",
    "cat '/proc'/\"$PPID\"/en\\viron",
    "ps eww $PPID",
]


@pytest.mark.parametrize("command", ENVIRON_READS)
async def test_unsandboxed_reads_of_a_process_environment_are_refused(
    context, command, monkeypatch
):
    """With the sandbox off, the shell's parent is the app, whose environment holds the key."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY)  # the key in the app's own environment
    context.modes.current = Mode.YOLO  # no approval stands in the way
    tools = ToolRegistry([ExecShell(SandboxConfig(enabled=False))])
    call = ToolCall("c1", "exec_shell", json.dumps({"command": command}))
    [outcome] = await ToolDispatcher(tools, context, lambda event: None).run([call])
    assert not outcome.result.ok
    assert outcome.result.output.startswith("Error: Refused: this command reads a process's")
    assert CANARY not in outcome.result.output
    assert classify_command(command) is CommandClass.OTHER


@pytest.mark.parametrize(
    "command",
    ["cat /proc/cpuinfo", "ls /proc", "ps aux", "ps -o pid,user", "grep -rn environ src"],
)
async def test_unsandboxed_commands_that_read_no_environment_still_run(context, command):
    result = await ExecShell(SandboxConfig(enabled=False)).run({"command": command}, context)
    assert not result.output.startswith("Refused")


async def test_long_output_keeps_head_and_tail_and_stores_the_rest(context):
    result = await ExecShell().run({"command": "seq 1 20000"}, context)
    assert result.output.splitlines()[1] == "1"
    assert result.output.rstrip().endswith("20000")
    marker = result.output.split("full output in handle '")[1].split("'")[0]
    full = context.handles.read({"handle": marker, "count": True})
    assert full["lines"] == 20000


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("ls -la", CommandClass.READ_ONLY),
        ("git status", CommandClass.READ_ONLY),
        ("git log --oneline -5", CommandClass.READ_ONLY),
        ("git branch", CommandClass.READ_ONLY),
        ("git branch new-feature", CommandClass.OTHER),
        ("git commit -m x", CommandClass.OTHER),
        ("git diff --output=patch.txt", CommandClass.OTHER),
        ("find . -name '*.py'", CommandClass.READ_ONLY),
        ("find . -delete", CommandClass.OTHER),
        ("find . -exec rm {} ;", CommandClass.OTHER),
        ("find . -fprint0 out", CommandClass.OTHER),
        ("cat /proc/cpuinfo", CommandClass.READ_ONLY),
        ("rg --pre ./script foo", CommandClass.OTHER),
        ("cat a.txt > b.txt", CommandClass.OTHER),
        ("ls | sh", CommandClass.OTHER),
        ("echo $(rm -rf /)", CommandClass.OTHER),
        ("env rm -rf /", CommandClass.OTHER),
        ("pytest -q tests", CommandClass.TEST),
        ("python -m pytest", CommandClass.TEST),
        ("cargo test", CommandClass.TEST),
        ("npm test", CommandClass.TEST),
        ("make test", CommandClass.TEST),
        ("make install", CommandClass.OTHER),
        ("python script.py", CommandClass.OTHER),
        ("'unbalanced", CommandClass.OTHER),
    ],
)
def test_command_classifier(command, kind):
    assert classify_command(command) is kind


def test_confine_refuses_escapes(tmp_path):
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("x")
    (root / "out_link").symlink_to(tmp_path / "outside.txt")
    (root / "in_link").symlink_to(root / "sub")
    assert confine(root, "sub/../sub/file.py") == (root / "sub" / "file.py").resolve()
    assert confine(root, "in_link") == (root / "sub").resolve()
    for bad in ("../outside.txt", str(tmp_path / "outside.txt"), "out_link", "sub/../../x"):
        with pytest.raises(PathEscapeError, match="outside the workspace"):
            confine(root, bad)


def test_confine_spells_every_path_as_realpath_does(tmp_path):
    """A real root and a plain relative path take a shortcut past realpath (one lstat a
    part); every spelling, links and `..` and missing parts too, comes out the same, and
    a root later swapped for a link is seen as one."""
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("x")
    (root / "link").symlink_to("a")

    def real(spelled: Path, text: str) -> Path:
        return Path(os.path.realpath(os.path.join(spelled, text)))

    spellings = ["a/f.txt", "./a//f.txt", "a/", ".", "missing/x", "link/f.txt", "a/../a/f.txt"]
    spellings.append("a/f.txt/below-a-file")
    for text in spellings:
        assert confine(root, text) == real(root, text), text
    root.rename(tmp_path / "moved")
    root.symlink_to(tmp_path / "moved")
    assert confine(root, "a/f.txt") == tmp_path / "moved" / "a" / "f.txt"


async def test_confine_leaves_a_symlink_loop_to_the_open_which_names_it(tmp_path):
    """Not a crash of the tool (pathlib's resolve raises RuntimeError on a loop): the
    path stays inside, and opening it is refused with a reason the model can read."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    assert confine(tmp_path, "loop").parent == tmp_path.resolve()
    context = ToolContext(workspace=tmp_path, session_id="s")
    for name in ("loop", "a", "loop/x"):
        with pytest.raises(ToolError, match=r"symbolic link|symlink"):
            await ReadFile().run({"path": name}, context)


def test_confine_judges_a_workspace_named_through_a_symlink_by_its_real_path(tmp_path):
    """The spelled root is tried first; a path that resolves elsewhere is judged against
    the root's real path, as it is when the link is swapped to another directory."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "secret.txt").write_text("x")
    named = tmp_path / "named"
    named.symlink_to(tmp_path / "real")
    assert confine(named, "sub/f.py") == (tmp_path / "real" / "sub" / "f.py").resolve()
    assert confine(named, str(tmp_path / "real" / "sub")) == (tmp_path / "real" / "sub").resolve()
    with pytest.raises(PathEscapeError, match="outside the workspace"):
        confine(named, str(named / ".." / "other" / "secret.txt"))
    named.unlink()
    named.symlink_to(tmp_path / "other")
    assert confine(named, "secret.txt") == (tmp_path / "other" / "secret.txt").resolve()
    with pytest.raises(PathEscapeError, match="outside the workspace"):
        confine(named, str(tmp_path / "real" / "sub"))


def test_relative_to_workspace_names_resolved_paths_below_either_spelling(tmp_path):
    (tmp_path / "real" / "sub").mkdir(parents=True)
    named = tmp_path / "named"
    named.symlink_to(tmp_path / "real")
    inside = (tmp_path / "real" / "sub" / "f.py").resolve()
    assert relative_to_workspace(named, inside) == "sub/f.py"
    assert relative_to_workspace((tmp_path / "real").resolve(), inside) == "sub/f.py"
    assert relative_to_workspace(named, (tmp_path / "real").resolve()) == "."
    assert relative_to_workspace(named, tmp_path / "x") == (tmp_path / "x").as_posix()


@pytest.mark.parametrize(
    ("approval", "mode", "verdict"),
    [
        (ApprovalClass.AUTO, Mode.PLAN, Verdict.ALLOW),
        (ApprovalClass.SUGGEST, Mode.PLAN, Verdict.DENY),
        (ApprovalClass.REQUIRED, Mode.PLAN, Verdict.DENY),
        (ApprovalClass.SUGGEST, Mode.AGENT, Verdict.ASK),
        (ApprovalClass.REQUIRED, Mode.AGENT, Verdict.ASK),
        (ApprovalClass.REQUIRED, Mode.YOLO, Verdict.ALLOW),
    ],
)
def test_mode_decisions(approval, mode, verdict):
    assert decide(approval, mode).verdict is verdict


def test_plan_artifacts_are_allowed_in_plan_mode():
    assert decide(ApprovalClass.SUGGEST, Mode.PLAN, plan_artifact=True).verdict is Verdict.ALLOW


def test_handle_projections(tmp_path):
    store = HandleStore()
    text = "".join(f"row {i}\n" for i in range(1, 101))
    handle = store.put("s", "out_1", text)
    assert handle["kind"] == "var_handle" and handle["type"] == "str"
    assert handle["repr_preview"] == text[:160]
    assert store.read({"handle": "s/out_1", "range": {"start": 2, "end": 3}})["content"] == (
        "row 2\nrow 3\n"
    )
    assert store.read({"handle": handle, "slice": {"start": 0, "end": 5}})["content"] == "row 1"
    assert (
        store.read({"handle": "s/out_1", "slice": {"start": 99, "unit": "lines"}})["content"]
        == "row 100\n"
    )
    counted = store.read({"handle": "s/out_1", "count": True})
    assert (counted["lines"], counted["chars"]) == (100, len(text))
    limited = store.read({"handle": "s/out_1", "slice": {"start": 0}, "max_chars": 10})
    assert limited["truncated"] and limited["shown_chars"] == 10
    assert limited["omitted_chars"] == len(text) - 10
    store.put("s", "data", {"items": [{"id": 1}, {"id": 2}]})
    found = store.read({"handle": "s/data", "jsonpath": "$.items[?@.id > 1].id"})
    assert json.loads(found["content"]) == [2]
    assert store.read({"handle": "s/data", "count": True})["json_type"] == "dict"
    assert store.read({"handle": "s/data", "introspect": True})["keys"] == ["items"]
    for bad in ({"handle": "s/out_1"}, {"handle": "s/out_1", "count": True, "introspect": True}):
        with pytest.raises(HandleError, match="exactly one projection"):
            store.read(bad)
    with pytest.raises(HandleError, match="no handle named"):
        store.read({"handle": "s/missing", "count": True})


def test_file_handles_follow_a_growing_transcript(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}\n')
    store = HandleStore()
    store.put_file("agent:x", "transcript", path)
    with path.open("a") as handle:
        handle.write('{"n": 3}\n')
    reply = store.read({"handle": "agent:x/transcript", "range": {"start": 3, "end": 3}})
    assert reply["content"] == '{"n": 3}\n'
    assert store.read({"handle": "agent:x/transcript", "count": True})["lines"] == 3


async def test_fetch_url_refuses_loopback_and_private_addresses(context):
    for url in ("http://127.0.0.1:9/", "http://localhost/", "http://169.254.169.254/latest"):
        with pytest.raises(ToolError, match="private, loopback or link-local"):
            await FetchUrl().run({"url": url}, context)
    with pytest.raises(ToolError, match="only http"):
        await FetchUrl().run({"url": "file:///etc/passwd"}, context)


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/hop"):
            hop = int(self.path[4:] or 0)
            self.send_response(302)
            self.send_header("Location", f"/hop{hop + 1}" if hop < 9 else "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<html><style>x{}</style><h1>Title</h1><p>Hello <b>world</b></p></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def pages():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_fetch_url_with_private_allowed_converts_html_and_caps_redirects(context, pages):
    context.allow_private_network = True
    page = await FetchUrl().run({"url": f"{pages}/hop5"}, context)
    assert page.output.splitlines()[1:] == ["Title", "", "Hello world"]
    with pytest.raises(ToolError, match="more than 5 redirects"):
        await FetchUrl().run({"url": f"{pages}/hop0"}, context)


def test_html_to_text_drops_scripts():
    assert html_to_text("<p>a</p><script>evil()</script><p>b</p>") == "a\n\nb"


def test_clean_text_strips_escapes_and_bidi():
    assert clean_text("ok\x1b[31mred\x1b[0m\u202eevil\tx\n") == "ok[31mred[0mevil\tx\n"
