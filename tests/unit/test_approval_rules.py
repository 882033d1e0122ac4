"""What "always" covers: a readable rule, which forms that write or run never match."""

from __future__ import annotations

import json
import stat

import pytest

from codewhale.approval_rules import RuleKind, approval_rule, shell_rule
from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.permissions import Mode, ModeSwitch
from codewhale.providers.types import ToolCall
from codewhale.tools.base import ToolContext, ToolResult
from codewhale.tools.registry import ToolRegistry, default_tools

DATA = "alpha beta\n"


@pytest.fixture
def workspace(tmp_path):
    """A workspace where each dangerous form, if it ran, would leave `pwned` behind."""
    (tmp_path / "data.txt").write_text(DATA)
    (tmp_path / "evil.mk").write_text("test:\n\ttouch pwned\n")
    (tmp_path / "Makefile").write_text("test:\n\t@echo tested\n")
    fake_ls = tmp_path / "ls"
    fake_ls.write_text("#!/bin/sh\ntouch pwned\n")
    fake_ls.chmod(fake_ls.stat().st_mode | stat.S_IXUSR)
    return tmp_path


class Session:
    """A dispatcher over the real tools whose user says "always" once, then denies."""

    def __init__(self, workspace, first_answer: str = "approve_always") -> None:
        self.asked: list[events.ApprovalRequested] = []
        self.first_answer = first_answer
        self.context = ToolContext(
            workspace=workspace, session_id="s", modes=ModeSwitch(Mode.AGENT)
        )
        self.dispatcher = ToolDispatcher(ToolRegistry(default_tools()), self.context, self.emit)

    def emit(self, event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            self.asked.append(event)
            event.resolve(self.first_answer if len(self.asked) == 1 else "deny")

    async def shell(self, command: str) -> ToolResult:
        call = ToolCall(f"c{len(self.asked)}", "exec_shell", json.dumps({"command": command}))
        [outcome] = await self.dispatcher.run([call])
        return outcome.result


# Granted for the first (a read-only form), the second must ask again.
PAIRS = [
    ("find . -name data.txt", "find . -name data.txt -exec touch pwned ';'"),
    ("awk '{print $1}' data.txt", "awk 'BEGIN { system(\"touch pwned\") }'"),
    ("ls -la", "./ls"),
    ("sed -n 1p data.txt", "sed -i s/alpha/pwned/ data.txt"),
    ("make test", "make test -f evil.mk"),
    ("git log", "git log --output=pwned"),
]


@pytest.mark.parametrize(("granted", "other"), PAIRS)
async def test_always_for_a_read_only_form_asks_again_for_one_that_writes_or_runs(
    workspace, granted, other
):
    session = Session(workspace)
    await session.shell(granted)
    assert len(session.asked) == 1
    assert "commands starting" in session.asked[0].scope
    await session.shell(granted)
    assert len(session.asked) == 1  # the rule covers the form it was granted for
    result = await session.shell(other)
    assert len(session.asked) == 2, f"{other!r} rode on the rule for {granted!r}"
    assert not result.ok and "denied" in result.output
    assert not (workspace / "pwned").exists()
    assert (workspace / "data.txt").read_text() == DATA


async def test_a_rule_for_an_exact_dangerous_command_matches_that_command_only(workspace):
    session = Session(workspace)
    command = "find . -name data.txt -exec touch pwned ';'"
    await session.shell(command)
    assert session.asked[0].scope == f"exactly this exec_shell call: `{command}`"
    (workspace / "pwned").unlink()
    result = await session.shell(command)
    assert result.ok and len(session.asked) == 1 and (workspace / "pwned").exists()
    await session.shell("find . -name data.txt -exec touch other ';'")
    assert len(session.asked) == 2 and not (workspace / "other").exists()


async def test_approving_once_stores_no_rule(workspace):
    session = Session(workspace, first_answer="approve")
    await session.shell("ls -la")
    await session.shell("ls -la")
    assert len(session.asked) == 2 and session.context.always_allowed == set()


# Forms that write files or run programs, each against the rule a read-only form grants.
@pytest.mark.parametrize(
    ("granted", "other"),
    [
        *PAIRS,
        ("find . -name x", "find . -execdir touch y ';'"),
        ("find . -name x", "find . -ok touch y ';'"),
        ("find . -name x", "find . -okdir touch y ';'"),
        ("find . -name x", "find . -delete"),
        ("find . -name x", "find . -fprint out"),
        ("find . -name x", "find . -fprint0 out"),
        ("find . -name x", "find . -fprintf out %p"),
        ("find . -name x", "find . -fls out"),
        ("find . -name x", "find . {-exec,touch,y,+}"),
        ("find . -name x", "find *"),
        ("sed -n 1p f", "sed --in-place s/a/b/ f"),
        ("sed -n 1p f", "sed --in-pl=.bak s/a/b/ f"),  # getopt takes abbreviations
        ("sed -n 1p f", "sed -ni 1p f"),
        ("sed -n 1p f", "sed -n '1w out' f"),
        ("sed -n 1p f", "sed 's/a/b/w out' f"),
        ("sed -n 1p f", "sed '1e touch y' f"),
        ("sed -n 1p f", "sed 's/a/touch y/e' f"),
        ("sed -n 1p f", "sed -e p -e 'w out' f"),
        ("sed -n 1p f", "sed -f script.sed f"),
        ("awk '{print $1}' f", "awk '{print | \"sh\"}' f"),
        ("awk '{print $1}' f", "awk '{print > \"out\"}' f"),
        ("awk '{print $1}' f", "awk '{\"date\" | getline d}' f"),
        ("awk '{print $1}' f", "awk -f prog.awk f"),
        ("awk '{print $1}' f", "awk '@load \"x\"; {print}' f"),
        ("ls", "/tmp/ls"),
        ("ls", "bin/ls"),
        ("ls", "X=1 ls"),
        ("ls", "ls; touch y"),
        ("ls", "ls > out"),
        ("ls", "ls $(touch y)"),
        ("git log", "git -c core.pager=evil log"),
        ("git log", "git --config-env=core.pager=X log"),
        ("git log", "git log --config-env=x=y"),
        ("git log", "git log --outp=out"),
        ("git grep foo", "git grep -O foo"),
        ("git grep foo", "git grep --open-files-in-pager=sh foo"),
        ("git fetch origin", "git fetch --upload-pack=touch origin"),
        ("git diff", "git diff --ext-diff"),
        ("make test", "make test --file=evil.mk"),
        ("make test", "make test --makefile=evil.mk"),
        ("make test", "make test -C /tmp"),
        ("make test", "make test --directory=/tmp"),
        ("make test", "make test --eval=x:"),
        ("make test", "make test -sf evil.mk"),
        ("make test", "make test SHELL=/tmp/x"),
        ("rg foo", "rg --pre ./x foo"),
        ("sort data", "sort -o out data"),
        ("npm test", "npm test --script-shell=/tmp/x"),
        ("uv run pytest", "uv run pytest --basetemp=/home"),
    ],
)
def test_forms_that_write_or_run_never_match_a_read_only_rule(granted, other):
    rule = shell_rule(granted)
    assert rule.kind is RuleKind.PREFIX and rule.matches("exec_shell", {"command": granted})
    assert not rule.matches("exec_shell", {"command": other})


@pytest.mark.parametrize(
    ("granted", "same_rule"),
    [
        ("git status", "git status --short"),
        ("git log --oneline", "git log -n 5 --stat"),
        ("find . -name '*.py'", "find src -type f -newer x"),
        ("sed -n '1,5p' f", "sed -n '/a/,/b/p; s/x/y/g' g"),
        ("awk '{print $1}' f", "awk -F: -v OFS=, '{print $1, $2}' g"),
        ("make test", "make test -j4"),
        ("python -m pytest -q", "python -m pytest tests/unit"),
        ("npm run build -- --prod", "npm run build"),
        ("ls -la", "ls"),
    ],
)
def test_a_prefix_rule_keeps_covering_harmless_forms(granted, same_rule):
    assert shell_rule(granted).matches("exec_shell", {"command": same_rule})


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("git status --short", "git status"),
        ("npm run build -- --prod", "npm run build"),
        ("uv run pytest -q", "uv run pytest"),
        ("python -m pytest -q", "python -m pytest"),
        ("rm -rf build", "rm"),
    ],
)
def test_a_plain_command_gets_a_prefix_rule_that_says_what_it_leaves_out(command, prefix):
    assert approval_rule("exec_shell", {"command": command}).describe() == (
        f"exec_shell commands starting `{prefix}` (except chained or redirected ones, "
        "and options or scripts that write files or run other programs)"
    )


@pytest.mark.parametrize(
    "command",
    [
        "git -C x push",  # options before the subcommand take values: which one is unknown
        "python evil.py",
        "python3.12 evil.py",
        "uv run python x.py",
        "ls && rm -rf /",
        "X=1 make",
        "make",
        "env ls",
        "xargs rm",
        "./ls",
        "git log --output=x",
    ],
)
def test_other_commands_get_an_exact_rule(command):
    rule = approval_rule("exec_shell", {"command": command})
    assert rule.describe() == f"exactly this exec_shell call: `{command}`"


@pytest.mark.parametrize(
    ("tool", "arguments", "rule"),
    [
        ("fetch_url", {"url": "https://example.com/a?b"}, "fetch_url requests to example.com"),
        ("rlm_eval", {"name": "doc", "code": "1"}, "rlm_eval code in RLM session `doc`"),
        ("write_file", {"path": "a"}, "every write_file call"),
    ],
)
def test_other_tools_rules_read_as_what_they_allow(tool, arguments, rule):
    assert approval_rule(tool, arguments).describe() == rule


def test_subcommands_runs_hosts_and_sessions_stay_apart():
    def allows(granted: tuple[str, dict], other: tuple[str, dict]) -> bool:
        return approval_rule(*granted).matches(*other)

    def shell(command: str) -> tuple[str, dict]:
        return ("exec_shell", {"command": command})

    assert not allows(shell("git status"), shell("git push"))
    assert not allows(shell("npm run build"), shell("npm run deploy"))
    assert not allows(shell("python -m pytest"), shell("python -m pip install x"))
    assert not allows(shell("npx eslint ."), shell("npx rimraf ."))
    assert not allows(shell("cd a && make"), shell("cd b && make"))
    page = ("fetch_url", {"url": "https://docs.python.org/3/"})
    assert allows(page, ("fetch_url", {"url": "https://docs.python.org/2/"}))
    assert not allows(page, ("fetch_url", {"url": "https://evil.example/"}))
    assert not allows(("rlm_eval", {"name": "doc"}), ("rlm_eval", {"name": "other"}))
    assert not allows(shell("ls"), ("write_file", {"path": "ls"}))


def test_a_long_exact_command_is_shown_cut_but_matched_whole():
    command = "ls && " + "x" * 200
    rule = shell_rule(command)
    assert rule.describe().endswith("…`") and len(rule.describe()) < 120
    assert rule.matches("exec_shell", {"command": command})
    assert not rule.matches("exec_shell", {"command": command + "y"})
