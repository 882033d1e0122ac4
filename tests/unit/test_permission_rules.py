"""Permission rules in Claude Code's syntax: each form matches what it says, and no more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codewhale.approval_rules import approval_rule
from codewhale.rules.rule import Effect, RuleSyntaxError, parse_rule
from codewhale.rules.ruleset import PermissionRules, claude_rule_text
from codewhale.rules.sources import (
    FileKind,
    RuleFile,
    claude_user_settings,
    project_local_settings,
    rule_files,
    trust_store,
)

ROOT = Path("/work/repo")
HOME = Path("/home/me")


def rules_of(tmp_path: Path, settings: dict, *, project: bool = False) -> PermissionRules:
    """PermissionRules read from one Claude settings file holding `settings`."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    files = [RuleFile(path, FileKind.CLAUDE, project=project)]
    return PermissionRules.load(tmp_path, files, trust_store(tmp_path / "state"))


def shell(rules: PermissionRules, command: str) -> str | None:
    verdict = rules.verdict("exec_shell", {"command": command})
    return verdict.effect.value if verdict else None


def command_rule(text: str):
    return parse_rule(text, Effect.ALLOW, Path("s.json"), ROOT, HOME)


@pytest.mark.parametrize(
    ("rule", "command", "matches"),
    [
        ("Bash(npm test:*)", "npm test", True),
        ("Bash(npm test:*)", "npm test -- --watch", True),
        ("Bash(npm test:*)", "npm tester", False),
        ("Bash(npm *)", "npm install", True),
        ("Bash(npm *)", "npm", True),
        ("Bash(npm *)", "npmx install", False),
        ("Bash(git status)", "git status", True),
        ("Bash(git status)", "git status --short", False),
        ("Bash(ls*)", "lsof", True),
        ("Bash", "anything at all", True),
        ("Bash(*)", "anything at all", True),
    ],
)
def test_each_command_form_matches_what_it_says(rule, command, matches):
    assert command_rule(rule).matches_command(command) is matches


def test_a_compound_command_is_allowed_only_if_every_part_is(tmp_path):
    rules = rules_of(tmp_path, {"permissions": {"allow": ["Bash(echo:*)", "Bash(ls:*)"]}})
    assert shell(rules, "echo hi && ls -l | echo x") == "allow"
    assert shell(rules, "echo hi && rm -rf x") is None
    assert shell(rules, "echo $(rm -rf x)") is None  # what runs inside is not seen
    assert shell(rules, "echo hi > out.txt") is None  # writes a file
    assert shell(rules, "echo hi 2>&1") == "allow"
    assert shell(rules, 'echo "a && b"') == "allow"  # quoted: one part


def test_a_deny_on_any_part_denies_the_whole_command(tmp_path):
    rules = rules_of(tmp_path, {"permissions": {"allow": ["Bash(echo:*)"], "deny": ["Bash(rm:*)"]}})
    for command in (
        "rm -rf build",
        "echo ok && rm -rf build",
        "echo ok; rm x",
        "ls | xargs rm",
        "FOO=1 /bin/rm x",
        "sudo rm x",
        "echo $(rm x)",
        "(cd sub && rm x)",
    ):
        assert shell(rules, command) == "deny", command
    assert shell(rules, "echo rm") == "allow"


def test_deny_beats_ask_beats_allow(tmp_path):
    rules = rules_of(
        tmp_path,
        {
            "permissions": {
                "allow": ["Bash"],
                "ask": ["Bash(git push:*)"],
                "deny": ["Bash(git push --force:*)"],
            }
        },
    )
    assert shell(rules, "git status") == "allow"
    assert shell(rules, "git push origin") == "ask"
    assert shell(rules, "git push --force origin") == "deny"


def test_a_prefix_allow_never_covers_forms_that_write_or_run_programs(tmp_path):
    rules = rules_of(tmp_path, {"permissions": {"allow": ["Bash(find:*)", "Bash(sed:*)"]}})
    assert shell(rules, "find . -name '*.py'") == "allow"
    assert shell(rules, "find . -exec rm {} ;") is None
    assert shell(rules, "sed -i s/a/b/ f") is None


def test_path_rules_are_gitignore_style(tmp_path):
    workspace = tmp_path.resolve()
    rules = rules_of(
        workspace,
        {
            "permissions": {
                "deny": [
                    "Read(./secrets/**)",
                    "Read(*.pem)",
                    "Read(//etc/shadow)",
                    "Read(/config/prod)",
                    "Read(~/.ssh/**)",
                ]
            }
        },
    )
    denied = [
        workspace / "secrets" / "key.txt",
        workspace / "secrets",
        workspace / "deep" / "in" / "cert.pem",
        workspace / "config" / "prod" / "db.yml",  # a folder covers its contents
        Path("/etc/shadow"),
        Path.home() / ".ssh" / "id_ed25519",
    ]
    allowed = [
        workspace / "src" / "secrets.py",
        workspace / "pem.txt",
        workspace / "config" / "dev",
    ]
    assert all(rules.denied_read("read_file", path) for path in denied)
    assert not any(rules.denied_read("read_file", path) for path in allowed)
    # Every read tool is covered by Read(…).
    for tool in ("grep_files", "file_search", "list_dir", "rlm_open"):
        assert rules.denied_read(tool, denied[0])


def test_edit_and_write_rules_match_the_paths_written(tmp_path):
    workspace = tmp_path.resolve()
    rules = rules_of(
        workspace, {"permissions": {"allow": ["Edit(src/**)"], "deny": ["Write(./.env)"]}}
    )
    inside = rules.verdict("edit_file", {}, writes=[workspace / "src" / "a" / "b.py"])
    assert inside is not None and inside.effect is Effect.ALLOW
    assert rules.verdict("apply_patch", {}, writes=[workspace / "docs" / "x.md"]) is None
    env = rules.verdict("write_file", {}, writes=[workspace / ".env"])
    assert env is not None and env.effect is Effect.DENY


def test_web_mcp_agent_and_bare_tool_rules(tmp_path):
    rules = rules_of(
        tmp_path,
        {
            "permissions": {
                "allow": ["WebFetch(domain:docs.python.org)", "mcp__github__*", "rlm_eval"],
                "deny": ["mcp__slack", "Task(implementer)", "mcp__github__delete_repo"],
            }
        },
    )

    def effect(tool: str, arguments: dict) -> str | None:
        verdict = rules.verdict(tool, arguments)
        return verdict.effect.value if verdict else None

    assert effect("fetch_url", {"url": "https://docs.python.org/3/"}) == "allow"
    assert effect("fetch_url", {"url": "https://evil.example/"}) is None
    assert effect("mcp__github__list_issues", {}) == "allow"
    assert effect("mcp__github__delete_repo", {}) == "deny"
    assert effect("mcp__slack__post", {}) == "deny"
    assert effect("agent_open", {"type": "implementer"}) == "deny"
    assert effect("agent_open", {"type": "explore"}) is None
    assert effect("rlm_eval", {"name": "x"}) == "allow"


def test_unknown_tools_are_kept_flagged_and_match_nothing(tmp_path):
    rules = rules_of(
        tmp_path,
        {
            "permissions": {
                "deny": ["WebSearch", "NotebookEdit(*)", "SlashCommand(/deploy)", "Skill(x)"]
            },
            "model": "opus",
            "env": {"A": "1"},
            "permissions_extra": True,
        },
    )
    assert [rule.text for rule in rules.rules] == [
        "WebSearch",
        "NotebookEdit(*)",
        "SlashCommand(/deploy)",
        "Skill(x)",
    ]
    assert not any(rule.known(frozenset({"read_file"})) for rule in rules.rules)
    assert rules.loaded.warnings == []  # other keys are ignored without a word
    assert rules.verdict("exec_shell", {"command": "ls"}) is None


def test_bad_rules_and_damaged_files_warn_and_never_stop_the_session(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"permissions": {"deny": "Bash(rm:*)", "ask": [3, "Bash("]}}))
    files = [RuleFile(path, FileKind.CLAUDE, project=False) for path in (broken, odd)]
    rules = PermissionRules.load(tmp_path, files, trust_store(tmp_path / "state"))
    assert rules.rules == []
    warnings = "\n".join(rules.loaded.warnings)
    assert "broken.json: not valid JSON" in warnings
    assert "permissions.deny must be a list" in warnings
    assert "holds 3, not a rule string" in warnings
    assert "'Bash(' is not a rule" in warnings


def test_a_project_may_only_add_ask_and_deny(tmp_path):
    workspace = tmp_path / "repo"
    (workspace / ".claude").mkdir(parents=True)
    (workspace / ".codewhale").mkdir()
    project_toml = workspace / ".codewhale" / "config.toml"
    project_toml.write_text('[permissions]\nallow = ["Bash"]\ndeny = ["Bash(rm:*)"]\n')
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {
                    "allow": ["Bash(echo:*)"],
                    "ask": ["Bash(git push:*)"],
                    "defaultMode": "bypassPermissions",
                }
            }
        )
    )
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    files = rule_files(workspace, tmp_path / "user.toml", project_toml, env)
    rules = PermissionRules.load(workspace, files, trust_store(tmp_path / "state"))
    assert sorted(rule.text for rule in rules.rules) == ["Bash(git push:*)", "Bash(rm:*)"]
    assert sorted(rule.text for rule, _ in rules.loaded.ignored) == ["Bash", "Bash(echo:*)"]
    warnings = "\n".join(rules.loaded.warnings)
    assert "allow rule 'Bash' is ignored in a project config" in warnings
    assert "1 allow rule(s) in this project's files are not applied (Bash(echo:*))" in warnings


def test_always_in_this_project_writes_a_claude_rule_and_applies_it(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    local = project_local_settings(workspace)
    files = rule_files(workspace, tmp_path / "user.toml", None, {"CLAUDE_CONFIG_DIR": "/none"})
    rules = PermissionRules.load(workspace, files, trust_store(tmp_path / "state"))
    assert shell(rules, "npm run build --prod") is None
    written = rules.remember_in_project(approval_rule("exec_shell", {"command": "npm run build"}))
    assert written == "Bash(npm run build:*)"
    assert json.loads(local.read_text()) == {"permissions": {"allow": ["Bash(npm run build:*)"]}}
    assert local.stat().st_mode & 0o777 == 0o600
    assert shell(rules, "npm run build --prod") == "allow"
    # A later session in this workspace applies it too: the user approved that rule here.
    again = PermissionRules.load(workspace, files, trust_store(tmp_path / "state"))
    assert shell(again, "npm run build --prod") == "allow"
    # Other keys survive a later write, and removing takes only the rule.
    local.write_text(json.dumps({"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]}}))
    again.remember_in_project(approval_rule("fetch_url", {"url": "https://pypi.org/x"}))
    document = json.loads(local.read_text())
    assert document == {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)", "WebFetch(domain:pypi.org)"]},
    }
    [fetch] = [rule for rule in again.rules if rule.text.startswith("WebFetch")]
    again.remove(fetch)
    assert json.loads(local.read_text())["permissions"]["allow"] == ["Bash(ls:*)"]


def test_claude_rule_text_keeps_a_session_grant_no_wider():
    def text(tool: str, arguments: dict) -> str | None:
        return claude_rule_text(approval_rule(tool, arguments))

    assert text("exec_shell", {"command": "git log -n 5"}) == "Bash(git log:*)"
    assert text("exec_shell", {"command": "cd a && make"}) == "Bash(cd a && make)"
    assert text("write_file", {"path": "x"}) == "write_file"
    assert text("rlm_eval", {"name": "s"}) is None  # an RLM session lasts one session


def test_claude_user_settings_honours_claude_config_dir(tmp_path):
    assert claude_user_settings({"CLAUDE_CONFIG_DIR": str(tmp_path)}) == tmp_path / "settings.json"
    assert claude_user_settings({}) == Path.home() / ".claude" / "settings.json"


def test_an_empty_path_pattern_is_a_clear_error():
    with pytest.raises(RuleSyntaxError, match="the path pattern is empty"):
        command_rule("Read()")


def test_removing_a_rule_from_a_config_toml_keeps_the_rest_of_the_file(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        '# my settings\nmodel = "x"\n\n[permissions]\ndeny = ["Bash(rm:*)", "Read(.env)"]\n'
    )
    files = [RuleFile(config, FileKind.TOML, project=False)]
    rules = PermissionRules.load(tmp_path, files, trust_store(tmp_path / "state"))
    [rm] = [rule for rule in rules.rules if rule.text == "Bash(rm:*)"]
    rules.remove(rm)
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "x"\n')
    assert [rule.text for rule in rules.rules] == ["Read(.env)"]
    assert config.stat().st_mode & 0o777 == 0o600
