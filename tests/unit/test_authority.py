"""Authority as a value: intersections, live mode, refusals before approval, grant scopes."""

from __future__ import annotations

import asyncio
import json

import pytest

from codewhale.approval_rules import shell_rule
from codewhale.authority import READ_ONLY, Authority
from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.permissions import ApprovalClass, CommandClass, Mode, ModeSwitch
from codewhale.providers.types import ToolCall
from codewhale.subagents.roles import Role, role_authority
from codewhale.tools.base import ToolContext
from codewhale.tools.registry import ToolRegistry, default_tools

WRITE = ("write_file", ApprovalClass.SUGGEST)
PLAN = ("update_plan", ApprovalClass.SUGGEST)


def refuses(authority: Authority, tool: str, approval: ApprovalClass, **kw) -> bool:
    plan = tool in ("update_plan", "checklist_write")
    return authority.check(tool, approval, plan_artifact=plan, **kw) is not None


@pytest.mark.parametrize("grandchild", [Role.IMPLEMENTER, Role.GENERAL, Role.CUSTOM])
def test_a_read_only_opener_never_grants_writes_or_shell(grandchild):
    explore = Authority.full().narrowed(role_authority(Role.EXPLORE, "explore"))
    tools = ("write_file", "exec_shell") if grandchild is Role.CUSTOM else None
    below = explore.narrowed(role_authority(grandchild, grandchild.value, tools))
    assert refuses(below, *WRITE, arguments={"path": "x"})
    assert refuses(below, "exec_shell", ApprovalClass.REQUIRED, arguments={"command": "rm -r x"})
    assert not refuses(below, "exec_shell", ApprovalClass.REQUIRED, arguments={"command": "ls"})
    # Three levels down it is still no wider.
    deeper = below.narrowed(role_authority(Role.GENERAL, "general"))
    assert deeper.writes is False and deeper.shell is CommandClass.READ_ONLY


def test_intersection_keeps_the_narrower_of_each_part():
    verifier = role_authority(Role.VERIFIER, "verifier")
    review = role_authority(Role.REVIEW, "review")
    assert (
        verifier.narrowed(role_authority(Role.EXPLORE, "explore")).shell is CommandClass.READ_ONLY
    )
    assert verifier.narrowed(review).shell is None
    plan = role_authority(Role.PLAN, "plan")
    assert not refuses(plan, *PLAN) and refuses(plan, *WRITE)
    assert refuses(plan.narrowed(review), *PLAN)  # review may not even write plans
    custom = role_authority(Role.CUSTOM, "custom", ("read_file", "grep_files"))
    assert custom.narrowed(role_authority(Role.CUSTOM, "c", ("read_file",))).tools == {"read_file"}


def test_refusals_name_who_imposed_the_ceiling():
    below = role_authority(Role.EXPLORE, "explore").narrowed(
        role_authority(Role.IMPLEMENTER, "implementer")
    )
    message = below.check(*WRITE)
    assert message is not None
    assert "the implementer role (full access) opened by the explore role (read-only)" in message


def test_authority_survives_a_round_trip_and_unreadable_data_reads_as_read_only():
    value = role_authority(Role.CUSTOM, "custom", ("read_file",))
    assert Authority.from_json(json.loads(json.dumps(value.to_json()))) == value
    assert Authority.from_json(None) == READ_ONLY
    assert Authority.from_json({"shell": "everything"}).shell is None


def make_dispatcher(tmp_path, authority: Authority, mode: Mode = Mode.AGENT):
    seen: list[events.Event] = []
    context = ToolContext(
        workspace=tmp_path, session_id="s", modes=ModeSwitch(mode), authority=authority
    )
    return ToolDispatcher(ToolRegistry(default_tools()), context, seen.append), seen, context


async def test_the_authority_refuses_before_any_approval_is_asked(tmp_path):
    dispatcher, seen, _ = make_dispatcher(tmp_path, role_authority(Role.EXPLORE, "explore"))
    calls = [
        ToolCall("1", "exec_shell", json.dumps({"command": "touch owned"})),
        ToolCall("2", "write_file", json.dumps({"path": "owned", "content": "x"})),
    ]
    outcomes = await dispatcher.run(calls)
    assert not any(isinstance(e, events.ApprovalRequested) for e in seen)
    assert all(not o.result.ok for o in outcomes)
    assert "could not be proven read-only" in outcomes[0].result.output
    assert not (tmp_path / "owned").exists()


async def test_always_for_git_status_does_not_approve_rm(tmp_path):
    (tmp_path / "keep").write_text("x")
    dispatcher, seen, context = make_dispatcher(tmp_path, Authority.full())
    asked: list[str] = []

    async def answer() -> None:
        while True:
            await asyncio.sleep(0.001)
            for event in [e for e in seen if isinstance(e, events.ApprovalRequested)]:
                if event.request_id not in asked:
                    asked.append(event.request_id)
                    decision = "approve_always" if "git" in event.summary else "deny"
                    event.resolve(decision)

    answering = asyncio.create_task(answer())
    status = ToolCall("1", "exec_shell", json.dumps({"command": "git status"}))
    await dispatcher.run([status])
    await dispatcher.run([ToolCall("2", "exec_shell", json.dumps({"command": "git status -s"}))])
    assert len(asked) == 1  # the second git status rode on "always"
    removal = ToolCall("3", "exec_shell", json.dumps({"command": "rm keep"}))
    outcome = (await dispatcher.run([removal]))[0]
    answering.cancel()
    assert len(asked) == 2 and not outcome.result.ok
    assert (tmp_path / "keep").exists()
    assert context.always_allowed == {shell_rule("git status")}


async def test_a_mode_switch_reaches_a_context_at_its_next_call(tmp_path):
    dispatcher, _, context = make_dispatcher(tmp_path, Authority.full(), Mode.YOLO)
    write = ToolCall("1", "write_file", json.dumps({"path": "a.txt", "content": "1"}))
    assert (await dispatcher.run([write]))[0].result.ok
    context.modes.current = Mode.PLAN
    outcome = (await dispatcher.run([ToolCall("2", "write_file", write.arguments)]))[0]
    assert not outcome.result.ok and "Plan mode" in outcome.result.output
