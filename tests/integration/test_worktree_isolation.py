"""Isolated implementers in git worktrees: real git, the loopback model, `codewhale exec`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.runtime import RuntimeRequestError
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.store import SubagentStore
from tests.support.git_repo import branches, git, make_repo, tree_state
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task, wait_done

CALC = "def add(a, b):\n    return a + b\n"
CHANGED = REPORT.replace("CHANGES: None.", "CHANGES:\n- calc.py")


def writes(word: str, path: str, content: str) -> tuple[Reply, Reply]:
    """A child's script: write one file, then report."""
    write = ToolCallSpec("write_file", {"path": path, "content": content})
    return Reply(tool_calls=[write]), Reply(text=REPORT)


def tool_results(body) -> list[str]:
    """The results of the last tool calls a request carries (events may follow them)."""
    messages = body["messages"]
    calls = [n for n, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls")]
    if not calls:
        return []
    return [m["content"] for m in messages[calls[-1] + 1 :] if m["role"] == "tool"]


def completions(body) -> list[str]:
    return [
        str(m["content"])
        for m in body["messages"]
        if m["role"] == "user" and 'kind="subagent_completion"' in str(m["content"])
    ]


def test_two_isolated_implementers_on_one_file_apply_once_and_conflict_once(llm, tmp_path):
    workspace = make_repo(tmp_path / "repo", {"calc.py": CALC}).resolve()
    # The parent's uncommitted work, which the children must start from.
    (workspace / "calc.py").write_text(CALC + "# the parent's edit\n")
    (workspace / "units.txt").write_text("remember the units\n")
    index = (workspace / ".git" / "index").read_bytes()
    for word, operator in (("multiply", "a * b"), ("power", "a ** b")):
        edit = {"path": "calc.py", "old_string": "a + b", "new_string": operator}
        llm.route(
            for_task(word),
            Reply(
                tool_calls=[
                    ToolCallSpec("read_file", {"path": "units.txt"}),
                    ToolCallSpec("edit_file", edit),
                ]
            ),
            Reply(text=CHANGED),
        )
    seen: dict[str, object] = {}

    def parent(body) -> Reply:
        results = tool_results(body)
        if "opened" not in seen:
            seen["opened"] = True
            return Reply(
                tool_calls=[
                    ToolCallSpec(
                        "agent_open",
                        {
                            "prompt": word,
                            "name": name,
                            "type": "implementer",
                            "isolation": "worktree",
                        },
                    )
                    for word, name in (("multiply", "first"), ("power", "second"))
                ]
            )
        if "asked_first" not in seen and len(completions(body)) == 2:
            seen["asked_first"] = True
            seen["before_apply"] = tree_state(workspace)
            seen["events"] = completions(body)
            return Reply(tool_calls=[ToolCallSpec("agent_apply", {"name": "first"})])
        if "asked_first" in seen and "first" not in seen:
            seen["first"] = json.loads(results[-1])
            seen["after_first"] = tree_state(workspace)
            return Reply(tool_calls=[ToolCallSpec("agent_apply", {"name": "second"})])
        if "first" in seen and "second" not in seen:
            seen["second"] = json.loads(results[-1])
            return Reply(text="one applied, one conflicted")
        return Reply(text="waiting for the implementers")

    llm.respond = parent
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    result = subprocess.run(
        # The children's edits and the applies ask in Agent mode; the script only edits.
        [*command, "--approve", "auto", "make both"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr

    # Both children saw the parent's uncommitted state, and edited it in their worktrees.
    for word, operator in (("multiply", "a * b"), ("power", "a ** b")):
        asked = [r.json for r in llm.requests if for_task(word)(r.json)]
        read, edited = tool_results(asked[-1])
        assert "remember the units" in read
        assert f"+    return {operator}" in edited and "# the parent's edit" in edited
    # Until agent_apply the work tree was exactly the parent's, untouched by either child.
    before = seen["before_apply"]
    assert isinstance(before, dict)
    assert before["calc.py"] == (CALC + "# the parent's edit\n").encode()
    # Each completion carried its diff summary.
    events = seen["events"]
    assert isinstance(events, list)
    assert all("Changes in its worktree (branch codewhale/" in event for event in events)
    assert all("1 file changed, +1 −1\n- calc.py (+1 −1)" in event for event in events)
    assert all('"files_changed": 1' in event for event in events)

    first, second = seen["first"], seen["second"]
    assert isinstance(first, dict) and isinstance(second, dict)
    assert first["applied"] is True and first["changes"]["files_changed"] == 1
    assert second["applied"] is False and second["conflicts"] == ["calc.py"]
    assert "Nothing was changed" in second["message"]
    # The first landed on top of the parent's edit; the second changed nothing at all.
    assert (workspace / "calc.py").read_text() == (
        "def add(a, b):\n    return a * b\n# the parent's edit\n"
    )
    assert tree_state(workspace) == seen["after_first"]
    assert (workspace / ".git" / "index").read_bytes() == index  # nothing staged
    isolated = sorted(b for b in branches(workspace) if b.startswith("codewhale/"))
    assert len(isolated) == 2
    records = {r.name: r for r in SubagentStore(workspace).load()}
    assert records["first"].worktree and records["first"].worktree["applied_at_ms"]
    assert records["second"].worktree and records["second"].worktree["applied_at_ms"] is None
    assert Path(records["second"].worktree["path"]).is_dir()  # kept: not closed, not pruned


async def test_outside_git_isolation_is_a_clear_error(llm, make_session):
    session = make_session()
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "x", "isolation": "worktree"})]),
        Reply(text="understood"),
    )
    await session.submit("try it")
    await session.close()
    [refusal] = tool_results(llm.requests[1].json)
    assert 'isolation "worktree" needs a git repository' in refusal
    assert "Run `git init` there" in refusal
    assert not session.agents()
    with pytest.raises(SpawnError, match="must be"):
        session.manager.open({"prompt": "x", "isolation": "yes"})


async def test_agent_close_keeps_the_worktree_or_deletes_it(llm, make_session, tmp_path):
    workspace = make_repo(tmp_path / "repo").resolve()
    session = make_session()
    ids = {}
    for word in ("alpha", "beta", "gamma"):
        llm.route(for_task(word), *writes(word, f"{word}.txt", word))
        opened = session.manager.open({"prompt": word, "isolation": "worktree"})
        ids[word] = opened["agent_id"]
    trees = {}
    for word, agent_id in ids.items():
        done = await wait_done(session, agent_id)
        trees[word] = done["worktree"]
        assert done["worktree"]["diff"]["files"] == [
            {"path": f"{word}.txt", "added": 1, "deleted": 0}
        ]
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_close", {"agent_id": ids["alpha"]}),
                ToolCallSpec("agent_close", {"agent_id": ids["beta"], "keep_worktree": True}),
                ToolCallSpec("agent_close", {"agent_id": ids["gamma"], "keep_worktree": False}),
            ]
        ),
        Reply(text="closed"),
    )
    await session.submit("close them")
    undecided, kept, deleted = (
        json.loads(text)["worktree_action"] for text in tool_results(llm.requests[-1].json)
    )
    await session.close()

    assert undecided["kept"] and "Choose: apply it with agent_apply" in undecided["message"]
    assert '"keep_worktree": true' in undecided["message"]
    assert "git worktree remove --force" in undecided["message"]
    assert "deleted 24 h after" in undecided["message"]
    assert kept["kept"] and "until it is deleted" in kept["message"]
    assert not deleted["kept"] and "1 file changed, +1 −0, not applied" in deleted["message"]
    assert Path(trees["alpha"]["path"]).is_dir() and Path(trees["beta"]["path"]).is_dir()
    assert not Path(trees["gamma"]["path"]).exists()
    assert trees["gamma"]["branch"] not in branches(workspace)
    assert trees["beta"]["branch"] in branches(workspace)
    # Nothing reached the work tree: none of them was applied.
    assert not any((workspace / f"{word}.txt").exists() for word in ids)
    records = {r.agent_id: r.worktree or {} for r in SubagentStore(workspace).load()}
    assert records[ids["beta"]]["keep"] is True
    assert records[ids["gamma"]]["removed_at_ms"]


async def test_an_agent_file_with_isolation_worktree_opens_in_a_worktree(
    llm, make_session, tmp_path
):
    workspace = make_repo(tmp_path / "repo").resolve()
    agents = workspace / ".codewhale" / "agents"
    agents.mkdir(parents=True)
    (agents / "careful.md").write_text(
        "---\nname: careful\ndescription: Lands changes in isolation.\n"
        "base_role: implementer\nisolation: worktree\n---\nYou land changes carefully.\n"
    )
    llm.respond = lambda body: Reply(text=REPORT)
    session = make_session()
    isolated = session.manager.open({"prompt": "land it", "type": "careful", "cwd": "."})
    shared = session.manager.open({"prompt": "share", "type": "careful", "isolation": "none"})
    await wait_done(session, isolated["agent_id"])
    await wait_done(session, shared["agent_id"])
    await session.close()

    assert isolated["isolation"] == "worktree"
    path = Path(isolated["worktree"]["path"])
    assert path.parent == workspace / ".git" / "codewhale-worktrees"
    assert isolated["worktree"]["branch"] == f"codewhale/{isolated['nickname'].lower()}"
    assert "isolation" not in shared and "worktree" not in shared
    records = {r.agent_id: r for r in SubagentStore(workspace).load()}
    assert records[isolated["agent_id"]].workspace == str(path)
    assert records[shared["agent_id"]].workspace == str(workspace)
    first = next(r.json for r in llm.requests if for_task("land it")(r.json))
    assert "- isolation: you work in a git worktree of your own" in first["messages"][1]["content"]


async def test_apply_works_after_a_restart_and_only_once(llm, make_session, tmp_path):
    workspace = make_repo(tmp_path / "repo").resolve()
    llm.route(for_task("make b"), *writes("make b", "b.txt", "from the child\n"))
    session = make_session()
    agent_id = session.manager.open({"prompt": "make b", "isolation": "worktree"})["agent_id"]
    await wait_done(session, agent_id)
    await session.close()
    assert not (workspace / "b.txt").exists()

    later = make_session()
    reply = await later.apply_agent(agent_id)
    assert reply["applied"] and (workspace / "b.txt").read_text() == "from the child\n"
    with pytest.raises(RuntimeRequestError, match="already applied"):
        await later.apply_agent(agent_id)
    await later.close()
    with pytest.raises(RuntimeRequestError, match="already applied"):
        await make_session().apply_agent(agent_id)


async def test_agent_apply_follows_the_mode_like_an_edit(llm, make_session, tmp_path):
    workspace = make_repo(tmp_path / "repo").resolve()
    llm.route(for_task("make c"), *writes("make c", "c.txt", "c\n"))
    session = make_session(mode=Mode.AGENT, approve="approve")
    agent_id = session.manager.open({"prompt": "make c", "isolation": "worktree"})["agent_id"]
    await wait_done(session, agent_id)
    apply = ToolCallSpec("agent_apply", {"agent_id": agent_id})
    llm.enqueue(Reply(tool_calls=[apply]), Reply(text="no"))
    session.set_mode(Mode.PLAN)
    await session.submit("apply it")
    [denied] = tool_results(llm.requests[-1].json)
    assert "Plan mode is read-only" in denied and not (workspace / "c.txt").exists()

    llm.enqueue(Reply(tool_calls=[apply]), Reply(text="yes"))
    session.set_mode(Mode.AGENT)
    await session.submit("apply it now")  # an edit-class call: Agent mode asks, as for edits
    await session.close()
    asked = [e for e in session.seen if isinstance(e, events.ApprovalRequested)]
    assert asked[-1].tool == "agent_apply" and asked[-1].file_change
    [applied] = tool_results(llm.requests[-1].json)
    assert json.loads(applied)["applied"] is True and (workspace / "c.txt").read_text() == "c\n"


async def test_applying_a_childs_protected_files_asks_even_in_yolo(llm, make_session, tmp_path):
    """A worktree child writes its own tree freely (here with a shell command); bringing
    its `.mcp.json` into the work tree is a protected write like any other."""
    workspace = make_repo(tmp_path / "repo").resolve()
    plant = ToolCallSpec("exec_shell", {"command": "echo '{}' > .mcp.json && echo d > d.txt"})
    llm.route(for_task("make d"), Reply(tool_calls=[plant]), Reply(text=REPORT))
    session = make_session(mode=Mode.YOLO, approve="deny")
    agent_id = session.manager.open({"prompt": "make d", "isolation": "worktree"})["agent_id"]
    await wait_done(session, agent_id)
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_apply", {"agent_id": agent_id})]))
    llm.enqueue(Reply(text="denied"))
    await session.submit("apply it")
    await session.close()
    [denied] = tool_results(llm.requests[-1].json)
    assert "denied" in denied
    assert not (workspace / ".mcp.json").exists() and not (workspace / "d.txt").exists()
    [asked] = [e for e in session.seen if type(e).__name__ == "ApprovalRequested"]
    assert ".mcp.json is protected" in asked.summary


async def test_finished_worktrees_are_pruned_by_age_when_a_session_opens(
    llm, make_session, tmp_path
):
    workspace = make_repo(tmp_path / "repo").resolve()
    session = make_session()
    ids = {}
    for word in ("old", "young", "pinned"):
        llm.route(for_task(word), *writes(word, f"{word}.txt", word))
        ids[word] = session.manager.open({"prompt": word, "isolation": "worktree"})["agent_id"]
    for agent_id in ids.values():
        await wait_done(session, agent_id)
    await session.manager.close(ids["pinned"], keep_worktree=True)
    await session.close()
    store = SubagentStore(workspace)
    records = store.load()
    day_and_more = int(time.time() * 1000) - 25 * 3_600_000
    for record in records:
        if record.agent_id in (ids["old"], ids["pinned"]):
            record.finished_at_ms = day_and_more
    store.write(store.snapshot(records))
    paths = {
        word: Path((r.worktree or {})["path"])
        for r in records
        for word in ids
        if r.agent_id == ids[word]
    }

    reopened = make_session(config="[subagents]\nworktree_keep_hours = 24\n")
    await reopened.manager.flush()

    assert not paths["old"].exists()
    assert paths["young"].is_dir() and paths["pinned"].is_dir()
    kept = [b for b in branches(workspace) if b.startswith("codewhale/")]
    assert len(kept) == 2
    assert git(workspace, "worktree", "list").count("codewhale-worktrees") == 2
    removed = {r.agent_id: (r.worktree or {}).get("removed_at_ms") for r in store.load()}
    assert removed[ids["old"]] and not removed[ids["young"]] and not removed[ids["pinned"]]
