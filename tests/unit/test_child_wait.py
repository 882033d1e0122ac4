"""What the status line and the transcript say about a turn held open for its children."""

from __future__ import annotations

from codewhale.subagents.events import AgentFinished, AgentProgress
from codewhale.subagents.records import AgentSnapshot
from codewhale.tui.waiting import ChildWait, waiting_text


def child(agent_id: str, nickname: str) -> AgentSnapshot:
    return AgentSnapshot(
        agent_id=agent_id,
        name=nickname.lower(),
        nickname=nickname,
        description="",
        type="general",
        role="general",
        status="running",
        worker_status="model_wait",
        activity="",
        steps_taken=0,
        elapsed_ms=0,
        tokens=0,
        terminal=False,
    )


def ended(agent_id: str, status: str) -> AgentFinished:
    return AgentFinished(seq=1, agent_id=agent_id, status=status, message=status)


def test_children_that_end_together_are_named_together_in_the_order_they_ended():
    wait = ChildWait()
    wait.start([child("a", "Moby"), child("b", "Orca"), child("c", "Willy"), child("d", "Shamu")])
    assert wait.remaining == 4 and waiting_text(wait.remaining) == "waiting on 4 sub-agents"
    wait.saw(AgentProgress(seq=1, agent_id="c", message="reading"))  # not an end
    for agent_id in ("c", "a", "b"):
        wait.saw(ended(agent_id, "completed"))
    assert waiting_text(wait.remaining) == "waiting on 1 sub-agent"
    assert wait.end() == "Willy, Moby and Orca finished — continuing"
    assert wait.remaining == 0


def test_a_wait_no_child_ended_leaves_no_marker():
    wait = ChildWait()
    wait.start([child("a", "Moby")])
    wait.saw(ended("x", "failed"))  # a child it does not wait on
    assert wait.end() == ""  # woken by a steer, or cancelled
    wait.saw(ended("a", "failed"))  # after the wait: nobody is woken
    assert wait.end() == ""
