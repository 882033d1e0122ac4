"""The sub-agent runtime in-process, against the loopback LLM."""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import replace

import pytest

from codewhale.permissions import Mode
from codewhale.providers.client import encode_body
from codewhale.runtime import events
from codewhale.subagents.lifecycle import ChildState
from codewhale.subagents.manager import QUEUED_TEXT
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.store import SubagentStore
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.subagents import REPORT, envelopes, for_task, wait_done


async def test_open_returns_at_once_and_the_child_completes_with_a_report(llm, make_session):
    session = make_session()
    llm.route(for_task("inspect"), Reply(text=REPORT, request_delay=0.2))
    opened = session.manager.open({"prompt": "inspect", "type": "explorer"})
    assert opened["status"] == "pending" and opened["agent_id"].startswith("agent_")
    assert len(opened["agent_id"]) == len("agent_") + 8
    assert opened["context_mode"] == "fresh"
    assert opened["prefix_cache"] == {"mode": "fresh", "parent_prefix": "not_inherited"}
    assert opened["follow_up"] == {"tool": "agent_eval", "agent_id": opened["agent_id"]}
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["status"] == "completed" and done["terminal"]
    assert done["type"] == "explore" and done["role"] == "explore"
    assert done["report"]["well_formed"] and done["report"]["summary"] == "did the task"
    assert done["usage"]["input"] > 0
    assert done["transcript_handle"]["session_id"] == f"agent:{opened['agent_id']}"
    first = llm.requests[0].json["messages"]
    assert first[0]["role"] == "system" and "role of `explore`" in first[0]["content"]
    assert first[0]["content"].count("SUMMARY:") == 1
    assert first[1]["content"] == (
        "Assignment metadata:\n- objective: inspect\n- role: explore\n- type: explore\n\n"
        "Task:\ninspect"
    )
    kinds = [e["kind"] for e in envelopes(session) if e["agent_id"] == opened["agent_id"]]
    assert kinds[0] == "queued" and kinds[1] == "started" and kinds[-1] == "completed"
    seqs = [e["seq"] for e in envelopes(session)]
    assert seqs == sorted(seqs) and seqs[0] == 1


SPAWN_ERRORS = [
    (
        {"prompt": "x", "type": "wizard"},
        "Invalid sub-agent type 'wizard'. Use: general (aliases: "
        "worker, default, general-purpose, general_purpose), explore (aliases: explorer, "
        "exploration), plan (aliases: planning, planner, awaiter), review (aliases: reviewer, "
        "code-review, code_review, code-reviewer), implementer (aliases: implement, "
        "implementation, builder), verifier (aliases: verify, verification, validator, tester), "
        "custom, code-reviewer, doc-writer, refactorer, test-writer",
    ),
    ({"prompt": "x", "type": "custom"}, "Custom sub-agent requires a non-empty allowed_tools list"),
    (
        {"prompt": "x", "type": "custom", "allowed_tools": ["read_file", "teleport", "fly"]},
        "Sub-agent requested unavailable tools: teleport, fly",
    ),
    (
        {"prompt": "x", "type": "explore", "role": "review"},
        "Conflicting type/agent_type and role/agent_role values",
    ),
    ({"prompt": "x", "max_depth": 4}, "max_depth must be between 0 and 3"),
    ({"prompt": "x", "name": "bad name"}, "name must match [A-Za-z0-9._-]+"),
    (
        {"prompt": "x", "model": "gpt-4o"},
        "Invalid model 'gpt-4o' for provider DeepSeek "
        "(accepted: deepseek-v4-pro, deepseek-v4-flash, deepseek-chat, deepseek-reasoner)",
    ),
    ({"prompt": "x", "cwd": "../elsewhere"}, "outside the workspace"),
    ({}, "agent_open needs a non-empty 'prompt'"),
]


@pytest.mark.parametrize(("arguments", "message"), SPAWN_ERRORS)
async def test_spawn_errors_have_the_exact_shapes(make_session, arguments, message):
    session = make_session()
    # Model ids are validated only against the official endpoint.
    session.manager.settings = replace(
        session.manager.settings, base_url="https://api.deepseek.com"
    )
    with pytest.raises(SpawnError) as caught:
        session.manager.open(arguments)
    await session.close()
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("alias", "role"),
    [
        (alias, role)
        for role, aliases in [
            ("general", ["worker", "default", "general-purpose", "general_purpose", " GENERAL "]),
            ("explore", ["explorer", "exploration"]),
            ("plan", ["planning", "planner", "awaiter"]),
            ("review", ["reviewer", "code-review", "code_review"]),
            ("implementer", ["implement", "implementation", "builder"]),
            ("verifier", ["verify", "verification", "validator", "tester"]),
        ]
        for alias in aliases
    ],
)
async def test_every_alias_resolves(llm, make_session, alias, role):
    session = make_session()
    llm.respond = lambda body: Reply(text=REPORT)
    opened = session.manager.open({"prompt": "aliases", "agent_type": alias})
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert opened["role"] == role


async def test_agent_definitions_resolve_to_their_base_role(llm, make_session):
    session = make_session()
    llm.respond = lambda body: Reply(text=REPORT)
    opened = session.manager.open({"prompt": "review it", "subagent_type": "code-reviewer"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert (opened["type"], opened["role"]) == ("code-reviewer", "review")
    system = llm.requests[0].json["messages"][0]["content"]
    assert "senior engineer" in system and "role of `code-reviewer`" in system
    offered = {t["function"]["name"] for t in llm.requests[0].json["tools"]}
    assert offered == {"read_file", "grep_files", "file_search"}


async def test_cap_reached_is_the_exact_error(llm, make_session):
    session = make_session(config="[subagents]\nmax_concurrent = 2\n")
    llm.respond = lambda body: Reply(text=REPORT, request_delay=0.5)
    first = session.manager.open({"prompt": "one"})
    session.manager.open({"prompt": "two"})
    with pytest.raises(SpawnError) as caught:
        session.manager.open({"prompt": "three"})
    assert str(caught.value) == (
        "Sub-agent limit reached (max 2, running 2). Close or wait for an existing agent to finish."
    )
    await wait_done(session, first["agent_id"])
    # Its slot is free once its task has wound down, just after its record ended.
    async with asyncio.timeout(120):  # a ceiling for a hang
        while session.manager.live_count() == 2:
            await asyncio.sleep(0.01)
    session.manager.open({"prompt": "four"})  # finished children free their slots
    await session.close()


async def test_launch_queue_runs_in_order_with_heartbeats(llm, make_session):
    session = make_session(config="[subagents]\nlaunch_concurrency = 1\n")
    session.manager.admission.queue_heartbeat = 0.05
    llm.respond = lambda body: Reply(text=REPORT, request_delay=0.15)
    ids = [session.manager.open({"prompt": f"job-{i}-end"})["agent_id"] for i in range(3)]
    for agent_id in ids:
        await wait_done(session, agent_id)
    await session.close()
    lifecycle = [
        (e["kind"], e["agent_id"])
        for e in envelopes(session)
        if e["kind"] in ("started", "completed")
    ]
    assert lifecycle == [
        ("started", ids[0]),
        ("completed", ids[0]),
        ("started", ids[1]),
        ("completed", ids[1]),
        ("started", ids[2]),
        ("completed", ids[2]),
    ]
    waiting = [e for e in envelopes(session, "progress") if e.get("message") == QUEUED_TEXT]
    assert {e["agent_id"] for e in waiting} >= {ids[2]}


async def test_cancelling_a_queued_child(llm, make_session):
    session = make_session(config="[subagents]\nlaunch_concurrency = 1\n")
    llm.respond = lambda body: Reply(text=REPORT, request_delay=0.3)
    first = session.manager.open({"prompt": "runs"})
    queued = session.manager.open({"prompt": "waits"})
    closed = await session.manager.close(queued["agent_id"])
    assert closed["status"] == "cancelled"
    assert (await wait_done(session, first["agent_id"]))["status"] == "completed"
    await session.close()
    assert not any(for_task("waits")(r.json) for r in llm.requests)


async def test_heartbeat_auto_cancel_frees_the_slot(llm, make_session):
    session = make_session()
    session.manager.liveness.timeout = 0.3
    llm.route(for_task("stuck"), Reply(fault=Fault.stall(seconds=20)))
    opened = session.manager.open({"prompt": "stuck"})
    done = await wait_done(session, opened["agent_id"])
    assert done["status"] == "cancelled"
    assert done["result"] == "Auto-cancelled after 0.3s without sub-agent progress."
    assert session.manager.live_count() == 0
    await session.close()


async def test_api_timeout_interrupts_and_continue_resumes_from_the_checkpoint(llm, make_session):
    session = make_session()
    session.manager.builder.api_timeout = 0.3
    llm.route(
        for_task("slow"),
        Reply(fault=Fault.stall(seconds=20)),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "slow"})
    interrupted = await wait_done(session, opened["agent_id"])
    assert interrupted["status"] == "interrupted"
    assert interrupted["error"] == (
        "API call timed out after 300ms; checkpoint preserved for continuation"
    )
    assert interrupted["continuable"] is True
    resumed = await session.manager.evaluate({"agent_id": opened["agent_id"], "continue": True})
    await session.close()
    assert resumed["continuation"] == {"resumed": True}
    assert resumed["status"] == "completed"
    second = llm.requests[-1].json["messages"]
    contents = [str(m.get("content")) for m in second]
    assert any("Task:\nslow" in c for c in contents)
    assert (
        "(API call timed out after 300ms; checkpoint preserved for continuation). "
        in (contents[-1])
    )
    assert "Continue the assignment" in contents[-1]


async def test_message_to_a_cancelled_child_is_not_an_error(llm, make_session):
    """A completed or failed child is revived by a message (test_revive_child.py); one
    stopped on purpose is not, and says so."""
    session = make_session()
    llm.route(for_task("quick"), Reply(fault=Fault.stall(seconds=60)))
    opened = session.manager.open({"prompt": "quick"})
    child = session.manager.find(opened["agent_id"])
    session.manager.stop(child, ChildState.CANCELLED, "cancelled by the test")
    await wait_done(session, opened["agent_id"])
    reply = await session.manager.evaluate({"agent_id": opened["agent_id"], "input": "more?"})
    await session.close()
    assert reply["message_delivery"] == {
        "delivered": False,
        "reason": "session already terminated; follow-up not delivered",
    }
    assert reply["status"] == "cancelled"


async def test_message_to_a_running_child_arrives_at_its_next_step(llm, make_session):
    session = make_session()
    llm.route(
        for_task("listen"),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "sleep 0.3"})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "listen"})
    while not envelopes(session, "tool_call_started"):
        await asyncio.sleep(0.01)
    reply = await session.manager.evaluate({"name": opened["name"], "message": "also check b"})
    assert reply["message_delivery"]["delivered"] is True
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert llm.requests[-1].json["messages"][-1] == {"role": "user", "content": "also check b"}


async def test_blocking_eval_times_out_without_error(llm, make_session):
    session = make_session()
    llm.route(for_task("long"), Reply(text=REPORT, request_delay=2.5))
    opened = session.manager.open({"prompt": "long"})
    reply = await session.manager.evaluate(
        {"agent_id": opened["agent_id"], "block": True, "timeout_ms": 10}
    )
    assert reply["timed_out"] is True and reply["terminal"] is False
    await session.manager.close(opened["agent_id"])
    await session.close()


async def test_eval_reference_errors(llm, make_session):
    session = make_session()
    llm.respond = lambda body: Reply(text=REPORT, request_delay=0.2)
    session.manager.open({"prompt": "a", "name": "twin"})
    with pytest.raises(SpawnError, match="Agent session ghost not found"):
        await session.manager.evaluate({"agent_id": "ghost"})
    with pytest.raises(SpawnError, match="already used by agent_"):
        session.manager.open({"prompt": "b", "name": "twin"})
    await session.close()


async def test_read_only_child_of_a_yolo_parent_cannot_write(llm, make_session):
    session = make_session(mode=Mode.YOLO)
    llm.route(
        for_task("peek"),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "evil.txt", "content": "x"})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "peek", "type": "explore"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert not (session.workspace / "evil.txt").exists()
    tool_reply = llm.requests[1].json["messages"][-1]["content"]
    assert "not available to the explore role (read-only)" in tool_reply
    offered = {t["function"]["name"] for t in llm.requests[0].json["tools"]}
    assert "write_file" not in offered and "agent_open" not in offered


async def test_custom_child_cannot_run_tools_outside_its_list(llm, make_session):
    session = make_session(mode=Mode.YOLO)
    llm.route(
        for_task("narrow"),
        Reply(tool_calls=[ToolCallSpec("list_dir", {})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open(
        {"prompt": "narrow", "type": "custom", "allowed_tools": [" read_file ", "read_file"]}
    )
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert (
        "list_dir is not available to the custom role (explicit tool list) "
        "(allowed tools: read_file)" in (llm.requests[1].json["messages"][-1]["content"])
    )
    assert [t["function"]["name"] for t in llm.requests[0].json["tools"]] == ["read_file"]


async def test_plan_mode_parent_makes_a_general_child_read_only(llm, make_session):
    session = make_session(mode=Mode.PLAN)
    llm.route(
        for_task("try"),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "w.txt", "content": "x"})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "try"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert not (session.workspace / "w.txt").exists()
    assert "Plan mode is read-only" in llm.requests[1].json["messages"][-1]["content"]


async def test_child_approvals_reach_the_parent_channel_naming_the_child(llm, make_session):
    session = make_session(mode=Mode.AGENT, approve="deny")
    llm.route(
        for_task("shell"),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo hi"})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "shell", "name": "runner"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    asked = [e for e in session.seen if isinstance(e, events.ApprovalRequested)]
    assert len(asked) == 1
    assert "runner" in asked[0].requester and asked[0].tool == "exec_shell"


async def test_fork_context_sends_the_parent_prefix_byte_identical(llm, make_session):
    session = make_session()
    llm.enqueue(
        Reply(
            tool_calls=[ToolCallSpec("agent_open", {"prompt": "forked job", "fork_context": True})]
        ),
        Reply(text="waiting for the child"),
        Reply(text="parent done"),
    )
    llm.route(for_task("forked job"), Reply(text=REPORT))
    await session.engine.run_turn("delegate with context")
    await session.close()
    parent_first = llm.requests[0]
    child_first = next(r for r in llm.requests if for_task("forked job")(r.json))
    parent_messages = encode_body({"messages": parent_first.json["messages"]})[:-2]
    child_messages = encode_body({"messages": child_first.json["messages"]})
    assert child_messages.startswith(parent_messages)
    parent_tools = encode_body({"tools": parent_first.json["tools"]})[1:-1]
    assert parent_tools in parent_first.raw_body and parent_tools in child_first.raw_body
    assert parent_messages[len(b'{"messages":') :] in child_first.raw_body
    tail = child_first.json["messages"][len(parent_first.json["messages"]) :]
    assert tail[0]["content"].startswith("<codewhale:fork_state>")
    assert tail[1]["content"].startswith("<codewhale:subagent_context>")
    assert tail[2]["content"].startswith("Assignment metadata:")
    parent_second = [r for r in llm.requests if not for_task("forked job")(r.json)][1]
    projection = json.loads(
        next(m for m in parent_second.json["messages"] if m["role"] == "tool")["content"]
    )
    assert projection["prefix_cache"] == {
        "mode": "forked",
        "parent_prefix": "preserved_byte_identical",
    }


async def test_completion_is_injected_into_the_open_parent_turn(llm, make_session):
    session = make_session()
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "child work"})]),
        Reply(text="I'll wait"),
        Reply(text="the child finished"),
    )
    llm.route(for_task("child work"), Reply(text=REPORT, request_delay=0.2))
    result = await session.engine.run_turn("go")
    await session.close()
    assert result.final_text == "the child finished"
    event = llm.requests[-1].json["messages"][-1]
    assert event["role"] == "user"
    text = event["content"]
    assert text.startswith('<codewhale:runtime_event kind="subagent_completion">')
    assert "internal runtime event, not a message from the user" in text
    done = json.loads(text.split("<codewhale:subagent.done>")[1].split("</codewhale")[0])
    assert set(done) == {"agent_id", "type", "status", "summary_complete", "next_action"}
    assert done["status"] == "completed" and done["summary_complete"] is True
    assert result.usage.input_tokens > session.engine.usage.input_tokens / 2


async def test_malformed_report_gets_one_reminder(llm, make_session):
    session = make_session()
    llm.route(for_task("sloppy"), Reply(text="all good, trust me"), Reply(text="still sloppy"))
    opened = session.manager.open({"prompt": "sloppy"})
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["report"]["well_formed"] is False
    assert done["report"]["raw"] == "still sloppy"
    reminders = [
        r
        for r in llm.requests
        if "did not follow the output contract" in json.dumps(r.json["messages"][-1])
    ]
    assert len(reminders) == 1


async def test_claimed_changes_are_checked_against_git(llm, make_session):
    session = make_session()
    subprocess.run(["git", "init", "-q"], cwd=session.workspace, check=True)
    claim = REPORT.replace("CHANGES: None.", "CHANGES:\n- a.py\n- ghost.py")
    llm.route(
        for_task("claim"),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "a.py", "content": "x\n"})]),
        Reply(text=claim),
    )
    opened = session.manager.open({"prompt": "claim", "type": "implementer"})
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["verification"]["status"] == "claim_mismatch"
    assert done["verification"]["not_in_git_status"] == ["ghost.py"]


async def test_records_persist_and_reload(llm, make_session):
    session = make_session()
    llm.respond = lambda body: Reply(text=REPORT)
    opened = session.manager.open({"prompt": "persist me", "description": "persisted job"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    (record,) = SubagentStore(session.workspace).load()
    assert record.agent_id == opened["agent_id"]
    assert record.description == "persisted job" and record.status == "completed"
    assert record.session_boot_id.startswith("boot_") and len(record.session_boot_id) == 17
    assert [e["seq"] for e in record.events] == sorted(e["seq"] for e in record.events)
    transcript = SubagentStore(session.workspace).transcript_path(record.agent_id)
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert lines[0]["role"] == "system" and lines[-1]["content"] == REPORT
    second = make_session()
    archived = second.manager.records(include_archived=True)
    assert archived[0]["from_prior_session"] is True
    assert second.manager.records() == []
    await second.close()


async def test_twenty_children_with_failures_and_a_cancel(llm, make_session):
    session = make_session()
    for i in range(20):
        if i in (3, 11):
            llm.route(for_task(f"job-{i}-end"), Reply(fault=Fault.status(400, message="bad input")))
        else:
            llm.route(for_task(f"job-{i}-end"), Reply(text=REPORT, request_delay=0.3))
    ids = [session.manager.open({"prompt": f"job-{i}-end"})["agent_id"] for i in range(20)]
    await session.manager.close(ids[7])
    results = [await wait_done(session, agent_id) for agent_id in ids]
    await session.close()
    statuses = [r["status"] for r in results]
    assert statuses.count("completed") == 17
    assert [statuses[i] for i in (3, 11)] == ["failed", "failed"]
    assert statuses[7] == "cancelled"
    assert "bad input" in results[3]["error"]
    saved = {r.agent_id: r.status for r in SubagentStore(session.workspace).load()}
    assert [saved[agent_id] for agent_id in ids] == statuses


async def test_children_survive_a_cancelled_parent_turn(llm, make_session):
    session = make_session()
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "outlive"})]),
        Reply(text="waiting"),
    )
    llm.route(for_task("outlive"), Reply(text=REPORT, request_delay=0.4))

    async def cancel_when_waiting():
        while not any(
            isinstance(e, events.AssistantMessage) and e.content == "waiting" for e in session.seen
        ):
            await asyncio.sleep(0.01)
        session.engine.cancel()

    result, _ = await asyncio.gather(session.engine.run_turn("go"), cancel_when_waiting())
    assert result.status == "interrupted"
    (record,) = session.manager.records()
    done = await wait_done(session, record["agent_id"])
    await session.close()
    assert done["status"] == "completed"


async def test_quitting_interrupts_running_children(llm, make_session):
    session = make_session()
    llm.route(for_task("endless"), Reply(fault=Fault.stall(seconds=20)))
    opened = session.manager.open({"prompt": "endless"})
    while session.manager.records()[0]["status"] != "running":
        await asyncio.sleep(0.01)
    await session.close()
    (record,) = SubagentStore(session.workspace).load()
    assert record.agent_id == opened["agent_id"]
    assert (record.status, record.error) == ("interrupted", "parent session closed")


async def test_a_child_with_depth_can_open_its_own_leaf_child(llm, make_session):
    session = make_session()
    llm.route(
        for_task("manager job"),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "leaf job", "max_depth": 1})]),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "leaf job"})]),
        Reply(text="waiting for my child"),
        Reply(text=REPORT),
    )
    # The leaf ends after its opener has answered and is waiting for it.
    llm.route(for_task("leaf job"), Reply(text=REPORT, request_delay=0.3))
    opened = session.manager.open({"prompt": "manager job", "max_depth": 1})
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["status"] == "completed"
    first_try = [r for r in llm.requests if for_task("manager job")(r.json)][1]
    assert "max_depth must be at most 0 for a sub-agent opened here" in json.dumps(
        first_try.json["messages"][-1]
    )
    records = session.manager.records()
    assert len(records) == 2 and all(r["status"] == "completed" for r in records)
    spawned = envelopes(session, "child_spawned")
    assert spawned[0]["agent_id"] == opened["agent_id"]
    manager_last = [r for r in llm.requests if for_task("manager job")(r.json)][-1]
    assert "subagent_completion" in json.dumps(manager_last.json["messages"][-1])


async def test_the_preview_tail_is_the_answer_of_the_current_step(llm, make_session):
    session = make_session()
    llm.route(
        for_task("preview"),
        Reply(
            reasoning="SECRET-THOUGHT " * 5,
            text="first step words",
            tool_calls=[ToolCallSpec("read_file", {"path": "a.py"})],
        ),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "preview", "type": "explore"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    tails = [e["text_tail"] for e in envelopes(session, "progress") if e.get("text_tail")]
    assert tails, "no preview was published"
    assert not any("SECRET-THOUGHT" in tail for tail in tails)
    # Each step's whole answer is shown at its end, and the next step starts afresh.
    assert "first step words" in tails
    assert tails[-1] == REPORT[-len(tails[-1]) :] and "first step" not in tails[-1]
