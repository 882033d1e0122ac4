"""`/permissions` lists the lasting rules with their files and removes one; the approval
dialog's "always in this project" (p) writes the call's rule to .claude/settings.local.json."""

from __future__ import annotations

import json

from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.transcript import Notice
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import type_and_send, wait_for


def notices(app: CodeWhaleApp) -> list[str]:
    return [str(notice.render()) for notice in app.query(Notice)]


async def test_permissions_lists_rules_with_their_files_and_removes_one(
    llm, make_app, workspace, isolated_home
):
    (workspace / ".claude").mkdir()
    project = workspace / ".claude" / "settings.json"
    project.write_text(
        json.dumps(
            {
                "model": "opus",
                "permissions": {
                    "deny": ["Bash(rm:*)", "WebSearch"],
                    "ask": ["Bash(git push:*)"],
                    "allow": ["Bash(ls:*)"],
                },
            }
        )
    )
    user = isolated_home / "claude" / "settings.json"
    user.parent.mkdir()
    user.write_text(json.dumps({"permissions": {"allow": ["Bash(echo:*)"]}}))
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await type_and_send(pilot, "/permissions")
        await wait_for(pilot, lambda: any("Permission rules" in text for text in notices(app)))
        [shown] = [text for text in notices(app) if "Permission rules" in text]
        lines = shown.splitlines()
        assert lines[1].split() == ["1.", "deny", "Bash(rm:*)", ".claude/settings.json"]
        assert "WebSearch" in lines[2] and "no such tool here: matches nothing" in lines[2]
        assert lines[3].split() == ["3.", "ask", "Bash(git", "push:*)", ".claude/settings.json"]
        assert lines[4].split() == ["4.", "allow", "Bash(echo:*)", str(user)]
        assert "allow Bash(ls:*)" in shown and "applies once you approve it" in shown
        # Rule 1 goes from its file, the other keys stay, and it stops applying at once.
        await type_and_send(pilot, "/permissions remove 1")
        await wait_for(pilot, lambda: any("Removed deny rule" in text for text in notices(app)))
        document = json.loads(project.read_text())
        assert document["model"] == "opus"
        assert document["permissions"]["deny"] == ["WebSearch"]
        assert [
            rule.text for rule in app.runtime.permission_rules.rules if rule.effect == "deny"
        ] == ["WebSearch"]
        await type_and_send(pilot, "/permissions remove 9")
        await wait_for(pilot, lambda: any("there is no rule 9" in text for text in notices(app)))
        await app.action_quit()


async def test_always_in_this_project_writes_the_rule_to_local_settings(llm, make_app, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "git log --oneline"})]),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "git log -n 1"})]),
        Reply(text="done"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "look")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("p")
        await wait_for(pilot, lambda: not app.turn_running)
        # The second `git log` ran unasked: the rule applies now, not only next session.
        assert not isinstance(app.screen, ApprovalScreen)
        await app.action_quit()
    local = workspace / ".claude" / "settings.local.json"
    assert json.loads(local.read_text()) == {"permissions": {"allow": ["Bash(git log:*)"]}}
    assert local.stat().st_mode & 0o777 == 0o600
    results = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    assert len(results) == 2 and not any(r.startswith("Error") for r in results)


async def test_an_attachment_denied_by_a_rule_is_named_but_never_read(llm, make_app, workspace):
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Read(./secrets/**)"]}})
    )
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.txt").write_text("TOPSECRET-77\n")
    llm.enqueue(Reply(text="noted"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await type_and_send(pilot, "see @secrets/key.txt and @notes.txt")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 1)
        chips = [text for text in notices(app) if text.startswith("📎")]
        assert chips == [
            "📎 secrets/key.txt: not attached (denied by the permission rule Read(./secrets/**))",
            "📎 notes.txt (1 line)",
        ]
        await app.action_quit()
    body = llm.requests[0].raw_body
    assert b"TOPSECRET-77" not in body and b"hello" in body
