"""Hooks without the app: matchers, settings checked with file and key, real hook
processes read as Claude Code reads them, a timeout that kills, trust per workspace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from codewhale.hooks.matchers import Matcher, MatcherError
from codewhale.hooks.names import HookEvent
from codewhale.hooks.session import HookReport, Hooks, open_hooks
from codewhale.hooks.settings import HookFile, load_hooks

PYTHON = sys.executable


@pytest.mark.parametrize(
    ("text", "tool", "expected"),
    [
        ("Bash", "exec_shell", True),
        ("Bash", "read_file", False),
        ("exec_shell", "exec_shell", True),
        ("Edit|Write", "edit_file", True),
        ("Edit|Write", "write_file", True),
        ("Edit|Write", "apply_patch", True),
        ("Edit|Write", "exec_shell", False),
        ("MultiEdit", "edit_file", True),
        ("Read", "read_file", True),
        ("Grep", "grep_files", True),
        ("Glob", "file_search", True),
        ("WebFetch", "fetch_url", True),
        ("Task", "agent_open", True),
        ("mcp__github__create_issue", "mcp__github__create_issue", True),
        ("mcp__github__.*", "mcp__github__create_issue", True),
        ("mcp__github__.*", "mcp__jira__create_issue", False),
        ("Web.*", "fetch_url", True),  # a regex written for Claude's names matches ours
        ("*", "anything", True),
        ("", "anything", True),
        ("Bas", "exec_shell", False),  # a plain word is exact, not a substring
    ],
)
def test_tool_matchers_take_claude_names_ours_alternations_and_regexes(text, tool, expected):
    assert Matcher.parse(text, tools=True).matches(tool) is expected


def test_session_start_matchers_name_the_kind_of_start():
    matcher = Matcher.parse("startup|resume", tools=False)
    assert matcher.matches("startup") and matcher.matches("resume")
    assert not matcher.matches("clear") and not matcher.matches("compact")
    # Only tool events translate Claude's tool names.
    assert not Matcher.parse("Bash", tools=False).matches("exec_shell")


def test_an_invalid_regex_is_a_matcher_error():
    with pytest.raises(MatcherError, match=r"'\(Bash' is not a valid regular expression"):
        Matcher.parse("(Bash", tools=True)


def settings_file(tmp_path: Path, document: object, name: str = "settings.json") -> HookFile:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return HookFile(path, project=False)


def test_malformed_settings_give_a_clear_error_naming_the_file(tmp_path):
    hook_file = settings_file(tmp_path, '{"hooks": {"PreToolUse": [}')
    loaded = load_hooks([hook_file])
    assert loaded.entries == []
    [problem] = loaded.problems
    assert problem.startswith(f"{hook_file.path}: not valid JSON (")
    assert "its hooks are not loaded until it is fixed" in problem


def test_each_wrong_entry_is_named_by_its_key_and_the_rest_still_load(tmp_path):
    good = {"type": "command", "command": "true"}
    hook_file = settings_file(
        tmp_path,
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [good, {"type": "command"}]},
                    {"matcher": "(", "hooks": [good]},
                    {"matcher": "Read", "hooks": [{**good, "timeout": -1}]},
                ],
                "Stop": {"hooks": [good]},
                "PostToolUse": [{"hooks": [{"type": "prompt", "prompt": "check it"}]}],
            }
        },
    )
    loaded = load_hooks([hook_file])
    assert [(entry.event, entry.matcher.text) for entry in loaded.entries] == [
        ("PreToolUse", "Bash")
    ]
    path = hook_file.path
    assert loaded.problems == [
        f"{path}: hooks.PreToolUse[0].hooks[1].command must be a non-empty string; ignored",
        f"{path}: hooks.PreToolUse[1].matcher '(' is not a valid regular expression "
        "(missing ), unterminated subpattern at position 0); the group is ignored",
        f"{path}: hooks.PreToolUse[2].hooks[0].timeout must be a positive number of "
        "seconds; ignored",
        f"{path}: hooks.Stop must be a list of matcher groups; ignored",
        f"{path}: hooks.PostToolUse[0].hooks[0].type is 'prompt'; only \"command\" hooks "
        "run here; ignored",
    ]


def test_events_this_app_never_fires_load_and_are_listed_as_unused(tmp_path):
    group = [{"hooks": [{"type": "command", "command": "true"}]}]
    hook_file = settings_file(tmp_path, {"hooks": {"FutureEvent": group, "PreToolUze": group}})
    loaded = load_hooks([hook_file])
    assert [(entry.event, entry.emitted) for entry in loaded.entries] == [
        ("FutureEvent", False),
        ("PreToolUze", False),
    ]
    # A near miss of a real event is pointed out; an unknown one is not an error.
    assert loaded.problems == [
        f"{hook_file.path}: hooks.PreToolUze is not an event this app fires; "
        "did you mean PreToolUse? (loaded, never run)"
    ]


def test_the_hooks_table_of_a_codewhale_config_has_the_same_shape(tmp_path):
    hook_file = settings_file(
        tmp_path,
        '[[hooks.SessionStart]]\nmatcher = "startup"\n'
        'hooks = [{ type = "command", command = "echo hi", timeout = 5 }]\n',
        name="config.toml",
    )
    [entry] = load_hooks([hook_file]).entries
    assert (entry.event, entry.matcher.text, entry.command, entry.timeout_secs) == (
        "SessionStart",
        "startup",
        "echo hi",
        5.0,
    )


def session(tmp_path: Path, settings: dict, *, project: bool = False) -> tuple[Hooks, list]:
    """Hooks from one settings file (the user's, or the project's), with their reports."""
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    user = tmp_path / "claude"
    user.mkdir(exist_ok=True)
    where = workspace / ".claude" if project else user
    where.mkdir(exist_ok=True)
    (where / "settings.json").write_text(json.dumps(settings))
    reports: list[HookReport] = []
    hooks = open_hooks(
        workspace=workspace,
        user_config=tmp_path / "config.toml",
        project_config=None,
        state_dir=tmp_path / "state",
        env={"CLAUDE_CONFIG_DIR": str(user), "PATH": "/usr/bin:/bin", "SECRET_API_KEY": "sk-x"},
        session_id="s1",
        on_run=reports.append,
    )
    return hooks, reports


def one_hook(event: str, code: str, timeout: float = 30) -> dict:
    command = f"{PYTHON} -c {json.dumps(code)}"
    return {"hooks": {event: [{"hooks": [{"command": command, "timeout": timeout}]}]}}


async def test_a_hook_gets_the_payload_and_the_allowlisted_environment(tmp_path):
    code = (
        "import json, os, sys; d = json.load(sys.stdin); "
        "print(json.dumps({'hookSpecificOutput': {'additionalContext': json.dumps("
        "[d, os.environ.get('CLAUDE_PROJECT_DIR'), os.environ.get('CODEWHALE_PROJECT_DIR'),"
        " 'SECRET_API_KEY' in os.environ])}}))"
    )
    hooks, _ = session(tmp_path, one_hook("SessionStart", code))
    verdict = await hooks.run(HookEvent.SESSION_START, "startup", {"source": "startup"})
    payload, claude_dir, our_dir, key_seen = json.loads(verdict.context[0])
    workspace = str(tmp_path / "repo")
    assert payload == {
        "session_id": "s1",
        "transcript_path": "",
        "cwd": workspace,
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    assert claude_dir == our_dir == workspace
    assert key_seen is False


@pytest.mark.parametrize(
    ("output", "blocked", "permission", "reason"),
    [
        (
            {
                "hookSpecificOutput": {
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "not today",
                }
            },
            True,
            "deny",
            "not today",
        ),
        ({"hookSpecificOutput": {"permissionDecision": "ask"}}, False, "ask", ""),
        ({"hookSpecificOutput": {"permissionDecision": "allow"}}, False, "allow", ""),
        ({"decision": "block", "reason": "tests fail"}, True, "deny", "tests fail"),
        ({"hookSpecificOutput": {"decision": {"behavior": "allow"}}}, False, "allow", ""),
    ],
)
async def test_json_output_decisions_are_read_as_claude_code_reads_them(
    tmp_path, output, blocked, permission, reason
):
    code = f"print({json.dumps(json.dumps(output))})"
    hooks, reports = session(tmp_path, one_hook("PreToolUse", code))
    verdict = await hooks.run(HookEvent.PRE_TOOL_USE, "exec_shell", {"tool_name": "exec_shell"})
    assert (verdict.blocked, verdict.permission, verdict.reason) == (blocked, permission, reason)
    assert reports[0].outcome == ("blocked" if blocked else "ok")


async def test_exit_2_blocks_with_stderr_and_other_exits_only_warn(tmp_path):
    blocking = "import sys; print('stop that', file=sys.stderr); sys.exit(2)"
    hooks, reports = session(tmp_path, one_hook("Stop", blocking))
    verdict = await hooks.run(HookEvent.STOP, None, {"stop_hook_active": False})
    assert verdict.blocked and verdict.reason == "stop that"
    failing = "import sys; print('broken', file=sys.stderr); sys.exit(1)"
    hooks, reports = session(tmp_path, one_hook("Stop", failing))
    verdict = await hooks.run(HookEvent.STOP, None, {"stop_hook_active": False})
    assert not verdict.blocked
    assert (reports[0].outcome, reports[0].exit_code, reports[0].message) == ("error", 1, "broken")


async def test_continue_false_stops_with_its_reason(tmp_path):
    code = "import json; print(json.dumps({'continue': False, 'stopReason': 'build is red'}))"
    hooks, _ = session(tmp_path, one_hook("UserPromptSubmit", code))
    verdict = await hooks.run(HookEvent.USER_PROMPT_SUBMIT, None, {"prompt": "go"})
    assert verdict.stop and verdict.stop_reason == "build is red"


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


async def test_a_hook_that_times_out_is_killed_with_everything_it_started(tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    # The shell starts a sleeper, names it, then waits: nothing ends before the timeout.
    command = f"sleep 300 & echo $! > {pid_file}; wait"
    settings = {"hooks": {"PostToolUse": [{"hooks": [{"command": command, "timeout": 0.5}]}]}}
    hooks, reports = session(tmp_path, settings)
    verdict = await hooks.run(HookEvent.POST_TOOL_USE, "exec_shell", {})
    assert not verdict.blocked
    [report] = reports
    assert report.outcome == "timed_out" and report.exit_code is None
    assert "timed out after 0.5 s; its process group was killed" in report.message
    assert not alive(int(pid_file.read_text()))


async def test_a_projects_hooks_run_only_once_trusted_and_again_when_changed(tmp_path):
    code = "print('ran')"
    hooks, reports = session(tmp_path, one_hook("SessionStart", code), project=True)
    assert len(hooks.untrusted()) == 1
    assert (await hooks.run(HookEvent.SESSION_START, "startup", {})).context == ()
    assert reports == []
    hooks.trust_all()
    assert (await hooks.run(HookEvent.SESSION_START, "startup", {})).context == ("ran",)
    # Trust is remembered for the workspace: a new session runs it at once...
    hooks, _ = session(tmp_path, one_hook("SessionStart", code), project=True)
    assert hooks.untrusted() == []
    # ...until the repository changes the command.
    hooks, _ = session(tmp_path, one_hook("SessionStart", "print('changed')"), project=True)
    assert len(hooks.untrusted()) == 1
